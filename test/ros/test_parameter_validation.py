"""Parameter validation without a node (milliseconds): every refusal names what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from memspec_ros import knobs
from memspec_ros.bundled_models import bundled_zoo_root, default_model_set_root
from memspec_ros.ros.parameters import (
    PARAMS,
    PARAMS_BY_NAME,
    POLICIES,
    RUNTIME_CHANGEABLE,
    ConfigError,
    validate,
)


def _defaults(**changes: object) -> dict[str, object]:
    values = {p.name: p.default for p in PARAMS}
    values.update(changes)
    return values


_DRAFTS = ["draft-robot", "draft-code", "draft-general"]


def _root(tmp_path: Path, predictor: bool) -> Path:
    """A catalogue with the folders validation looks at (it does not load weights)."""
    for name in ["target", *_DRAFTS]:
        (tmp_path / name).mkdir()
    lines = ["target: target"]
    if predictor:
        (tmp_path / "predictor.safetensors").write_bytes(b"")
        lines.append("predictor: predictor.safetensors")
    lines.append("drafts:")
    lines += [f"  - {{name: {n}, path: {n}, domain: {n.removeprefix('draft-')}}}" for n in _DRAFTS]
    (tmp_path / "catalogue.yaml").write_text("\n".join(lines) + "\n")
    return tmp_path / "catalogue.yaml"


def test_the_defaults_are_valid(tmp_path) -> None:
    cfg = validate(_defaults(catalogue=str(_root(tmp_path, predictor=True))))
    assert cfg.catalogue.draft_names == _DRAFTS
    assert cfg.catalogue.target == (tmp_path / "target").resolve()


def test_the_default_catalogue_is_the_default_model_set() -> None:
    cfg = validate(_defaults())
    assert cfg.catalogue.source == (default_model_set_root() / "catalogue.yaml").resolve()
    assert "draft-general" in cfg.catalogue.draft_names and cfg.catalogue.predictor is not None
    assert cfg["dtype"] == "auto"
    zoo = validate(_defaults(catalogue=str(bundled_zoo_root())))  # the 17 M fixture: a catalogue:= choice
    assert zoo.catalogue.source == (bundled_zoo_root() / "catalogue.yaml").resolve()


@pytest.mark.parametrize(("name", "knob"), [("num_speculative_tokens", knobs.K_SETTING),
                                             ("check_interval", knobs.CHECK_INTERVAL_SETTING),
                                             ("budget_drafts", knobs.BUDGET_DRAFTS),
                                             ("budget_bytes", knobs.BUDGET_BYTES),
                                             ("storage_bandwidth_mbps", knobs.STORAGE_BANDWIDTH_MBPS),
                                             ("load_timeout_s", knobs.LOAD_TIMEOUT_S)])
def test_shared_knobs_use_the_one_bounds_table(tmp_path, name, knob) -> None:
    spec = PARAMS_BY_NAME[name]
    assert (spec.int_range or spec.float_range) == (knob.low, knob.high)
    root = str(_root(tmp_path, predictor=True))
    step = 1 if knob.integer else 0.5
    with pytest.raises(ConfigError, match=f"parameter '{name}'.*outside"):
        validate(_defaults(catalogue=root, **{name: type(spec.default)(knob.high + step)}))
    descriptor = spec.descriptor()
    ranges = descriptor.integer_range or descriptor.floating_point_range
    assert (ranges[0].from_value, ranges[0].to_value) == (knob.low, knob.high)


@pytest.mark.parametrize(("changes", "match"), [
    ({"policy": "oracle"}, "'policy' = 'oracle' is not one of"),
    ({"dtype": "int8"}, "'dtype'"),
    ({"load_timeout_s": float("nan")}, "'load_timeout_s'"),
    ({"catalogue": "/nonexistent/catalogue.yaml"}, "'catalogue'.*does not exist"),
    ({"budget_drafts": 0, "budget_bytes": 0}, "both 0"),
    ({"policy": "static", "static_draft": "draft-poetry"}, "'static_draft'"),
    ({"policy": "memspec", "static_draft": "ngram", "ngram": False}, "'static_draft' = 'ngram' names the n-gram"),
    ({"ngram_min_n": 5, "ngram_max_n": 3}, "'ngram_min_n' = 5 exceeds ngram_max_n = 3"),
    ({"ngram_max_n": 17}, "'ngram_max_n' = 17 is outside"),
    ({"default_max_new_tokens": 600}, "'default_max_new_tokens' = 600 exceeds max_new_tokens_limit"),
])
def test_bad_values_are_refused_naming_the_parameter(tmp_path, changes, match) -> None:
    with pytest.raises(ConfigError, match=match):
        validate(_defaults(**{"catalogue": str(_root(tmp_path, predictor=True)), **changes}))


def test_the_ngram_member_name_is_reserved_and_static_may_run_it(tmp_path) -> None:
    root = _root(tmp_path, predictor=True)
    assert validate(_defaults(catalogue=str(root), policy="static", static_draft="ngram"))["static_draft"] == "ngram"
    (tmp_path / "ngram").mkdir()
    root.write_text(root.read_text() + "  - {name: ngram, path: ngram, domain: repeats}\n")
    for ngram in (True, False):
        with pytest.raises(ConfigError, match="named 'ngram', the name reserved for the n-gram member"):
            validate(_defaults(catalogue=str(root), ngram=ngram))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_every_compute_dtype_is_accepted(tmp_path, dtype) -> None:
    assert validate(_defaults(catalogue=str(_root(tmp_path, predictor=True)), dtype=dtype))["dtype"] == dtype


def test_params_file_problems_are_reported_first(tmp_path) -> None:
    with pytest.raises(ConfigError, match="'max_queue' has an invalid value in the params file: boom"):
        validate(_defaults(catalogue=str(_root(tmp_path, predictor=True))), {"max_queue": "boom"})


@pytest.mark.parametrize("policy", POLICIES)
def test_only_predictor_policies_need_the_predictor_file(tmp_path, policy) -> None:
    values = _defaults(catalogue=str(_root(tmp_path, predictor=False)), policy=policy)
    if policy in ("memspec", "memspec-predict-only"):
        with pytest.raises(ConfigError, match=r"'catalogue'.*names no predictor; policy .* needs one"):
            validate(values)
    else:
        assert validate(values).values["policy"] == policy


def test_only_the_run_time_knobs_are_writable_after_start_up() -> None:
    writable = {p.name for p in PARAMS if not p.descriptor().read_only}
    assert writable == RUNTIME_CHANGEABLE == {"policy", "check_interval", "num_speculative_tokens"}
