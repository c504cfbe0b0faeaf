"""Where the model zoo that ships with memspec_ros lives.

The zoo is committed under ``models/zoo`` in the repository. In a source checkout (pip
editable install, ``make`` targets) that is next to this package; in a colcon install it
is installed into the package's share directory. Resolving it in one place keeps the node,
the benchmarks and the tests pointing at the same files.
"""

from __future__ import annotations

from pathlib import Path

_REPO_ZOO = Path(__file__).resolve().parent.parent / "models" / "zoo"


def bundled_zoo_root() -> Path:
    """Return the directory of the bundled zoo (it may not exist in a bare install)."""
    if _REPO_ZOO.is_dir():
        return _REPO_ZOO
    try:
        from ament_index_python.packages import get_package_share_directory

        share = Path(get_package_share_directory("memspec_ros")) / "models" / "zoo"
        if share.is_dir():
            return share
    except Exception:
        pass
    return _REPO_ZOO
