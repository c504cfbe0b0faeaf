# Source me: activates .venv and the colcon-built interfaces, keeps DDS on this machine.
# Usage: . scripts/env.sh
_memspec_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$_memspec_root/.venv/bin/activate"
_memspec_nounset=0; case $- in *u*) _memspec_nounset=1; set +u;; esac
. "$_memspec_root/install/setup.bash"
[ "$_memspec_nounset" = 1 ] && set -u
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
unset _memspec_root _memspec_nounset
