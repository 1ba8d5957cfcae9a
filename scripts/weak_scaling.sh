#!/usr/bin/env bash
# The Megatron-LM paper's weak scaling sweep (arXiv 1909.08053) with train_gpt:
# a Markdown table and a PNG chart in a results directory. Without SCALE it runs
# the paper's models when nvidia-smi lists a GPU, else tiny CPU models. --help says it all;
# the body is shared with the other sweep in scripts/scaling/common.sh.
set -uo pipefail
# shellcheck source=scripts/scaling/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/scaling/common.sh"
sc_main weak "$@"
