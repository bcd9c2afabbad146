#!/usr/bin/env bash
# mamba-ssm and causal-conv1d, the GPU workers' CUDA kernels, as prebuilt wheels: never built on a worker.
# gpu-worker.txt's torch (2.10.0, CUDA 12.8) is one upstream publishes them for (cluster/locks/gpu-worker.in):
#   https://github.com/state-spaces/mamba/releases/download/v2.3.2.post1/
#     mamba_ssm-2.3.2.post1+cu12torch2.10cxx11abiTRUE-cp311-cp311-linux_x86_64.whl
#   https://github.com/Dao-AILab/causal-conv1d/releases/download/v1.7.0/
#     causal_conv1d-1.7.0+cu12torch2.10cxx11abiTRUE-cp311-cp311-linux_x86_64.whl
# so publishing those two needs no build. Building is for a torch or CUDA with no release wheel.
#
#   cluster/cuda-wheels.sh publish BUCKET [WHEEL...]
#       Once, on a machine with the AWS CLI. Checks each wheel against cluster/locks (the versions
#       gpu-worker.in pins; CPython 3.11, linux x86_64; a release wheel's +cuNNtorchX.Y tag against
#       gpu-worker.txt's torch and CUDA), uploads it to s3://BUCKET/wheels/ and writes
#       cluster/locks/cuda-kernels.txt: each version and sha256. The wheels: the projects' GitHub
#       release wheels above, or, with no WHEEL given, built here first (build, below).
#   cluster/cuda-wheels.sh build [DIR]
#       Compiles the two wheels into DIR (default: a new temporary folder, printed) by `pip wheel` in a venv
#       of gpu-worker.txt (python3.11): MAMBA_FORCE_BUILD=TRUE and CAUSAL_CONV1D_FORCE_BUILD=TRUE (compile,
#       no release-wheel download), ninja (else setuptools compiles one file at a time), MAX_JOBS parallel
#       compiles (default: what the memory holds, one per 8 GiB up to the cores; upstream's own builds run 2
#       on 16 GiB runners, which more sends out of memory; each job runs nvcc with --threads 4, hard-coded).
#       Needs nvcc (CUDA_HOME/bin, else PATH, else /usr/local/cuda/bin) of the CUDA major gpu-worker.txt's
#       torch was built for; without one it stops in one line (upstream's setup.py stops on a NameError).
#       The GPU architectures are upstream's setup.py's hard-coded -gencode list, not TORCH_CUDA_ARCH_LIST
#       (which it ignores, even clears): sm_75, 80, 87, 90; 100 and 120 with nvcc >= 12.8; 103, 110 and 121
#       with nvcc >= 13.0. How long: an estimate, about an hour on a few cores (mamba-ssm's many kernels the
#       most of it); upstream's release builds, 2 jobs on 4-core runners, are given up to 5 hours.
#   cluster/cuda-wheels.sh fetch BUCKET
#       The head's setup: s3://BUCKET/wheels/*.whl to ~/mamba-tune-wheels, which Ray copies to each GPU
#       worker (cluster_synced_files in cluster.yaml). Fails when cuda-kernels.txt names a wheel not there.
#   cluster/cuda-wheels.sh install
#       A GPU worker's setup: what cuda-kernels.txt names, from ~/mamba-tune-wheels only, hash-checked,
#       --no-deps (their requirements are in gpu-worker.txt); a failure that says why when a wheel is
#       missing or the file names none yet.
set -euo pipefail

locks=$(cd "$(dirname "$0")" && pwd)/locks
kernels=$locks/cuda-kernels.txt
wheels=$HOME/mamba-tune-wheels
built=""  # the folder build compiled into

die() { echo "cuda-wheels: $*" >&2; exit 1; }
pin() { sed -n "s/^$1==\([^ ;\\]*\).*/\1/p" "$2"; }  # the version a requirements file pins for $1
hashes() { sed -n 's/^[^#].*--hash=sha256:\([0-9a-f]\{64\}\).*/\1/p' "$kernels"; }  # those cuda-kernels.txt names

nvcc_path() {  # the nvcc torch's cpp_extension would use: CUDA_HOME's, else PATH's, else /usr/local/cuda's
    if [ -n "${CUDA_HOME:-}" ]; then
        [ -x "$CUDA_HOME/bin/nvcc" ] && echo "$CUDA_HOME/bin/nvcc"
    else
        command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; }
    fi
}

max_jobs() {  # parallel compiles the memory holds: one per 8 GiB, at least 1, at most the cores
    local gib cores
    gib=$(awk '/^MemTotal:/ {print int($2 / 1048576)}' /proc/meminfo)
    cores=$(nproc)
    local jobs=$((gib / 8))
    [ "$jobs" -ge 1 ] || jobs=1
    [ "$jobs" -le "$cores" ] || jobs=$cores
    echo "$jobs"
}

locked_cuda() {  # the CUDA major gpu-worker.txt's torch is built for: its CUDA runtime's pin
    sed -n 's/^nvidia-cuda-runtime\(-cu[0-9]*\)\{0,1\}==\([0-9]*\)\..*/\2/p' "$locks/gpu-worker.txt"
}

build() {  # the two wheels, compiled into ${1:-a new folder}, by pip wheel in a venv of the workers' lock
    local dir=${1:-} nvcc release cuda
    cuda=$(locked_cuda)
    [ -n "$cuda" ] || die "$locks/gpu-worker.txt pins no CUDA runtime: run make lock"
    nvcc=$(nvcc_path) || true
    [ -n "$nvcc" ] || die "no nvcc (CUDA_HOME/bin, PATH, /usr/local/cuda/bin): compiling the kernels needs a" \
        "CUDA $cuda toolkit (gpu-worker.txt's torch is built for CUDA $cuda); install it, or publish the release wheels"
    release=$("$nvcc" --version | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p')
    [ "${release%%.*}" = "$cuda" ] || die "$nvcc is CUDA ${release:-of no known release}, gpu-worker.txt's torch" \
        "is built for CUDA $cuda: put a CUDA $cuda toolkit's nvcc first (CUDA_HOME)"
    [ -n "$dir" ] || dir=$(mktemp -d)
    mkdir -p "$dir"
    export MAMBA_FORCE_BUILD=TRUE CAUSAL_CONV1D_FORCE_BUILD=TRUE MAX_JOBS=${MAX_JOBS:-$(max_jobs)}
    export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$nvcc")")}
    echo "cuda-wheels: compiling mamba-ssm and causal-conv1d with CUDA $release, MAX_JOBS=$MAX_JOBS, into $dir" \
        "(an estimate: about an hour on a few cores)" >&2
    python3.11 -m venv "$dir/venv"
    "$dir/venv/bin/pip" install -q --require-hashes --only-binary :all: -r "$locks/gpu-worker.txt"
    # the kernels' setup.py imports wheel; ninja (in the lock already, as mamba-ssm's requirement) makes the
    # compiles parallel. This machine only: nothing of it is in the wheels.
    "$dir/venv/bin/pip" install -q wheel ninja
    PATH="$dir/venv/bin:$PATH" "$dir/venv/bin/pip" wheel --no-deps --no-build-isolation --no-binary :all: -w "$dir" \
        "mamba-ssm==$(pin mamba-ssm "$locks/gpu-worker.in")" "causal-conv1d==$(pin causal-conv1d "$locks/gpu-worker.in")"
    echo "cuda-wheels: built into $dir: $(cd "$dir" && echo ./*.whl)" >&2
    built=$dir
}

publish() {
    [ $# -ge 1 ] || die "usage: $0 publish BUCKET [WHEEL...]"
    local bucket=$1 torch cuda lines="" files=() pkg want file name ver py abi plat tag sum
    shift
    torch=$(pin torch "$locks/gpu-worker.txt")
    cuda=$(locked_cuda)
    if [ -z "$torch" ] || [ -z "$cuda" ]; then die "$locks/gpu-worker.txt pins no torch or CUDA runtime: run make lock"; fi
    if [ $# -eq 0 ]; then
        build ""
        set -- "$built"/*.whl
    fi
    for pkg in mamba-ssm causal-conv1d; do
        want=$(pin "$pkg" "$locks/gpu-worker.in")
        file=""
        for f in "$@"; do case $(basename "$f") in "${pkg//-/_}"-*.whl) file=$f ;; esac; done
        [ -n "$file" ] || die "no ${pkg//-/_}-*.whl among: $*"
        name=$(basename "$file" .whl)
        IFS=- read -r _ ver py abi plat <<<"$name"
        [ "${ver%%+*}" = "$want" ] || die "$name: version ${ver%%+*}, but cluster/locks/gpu-worker.in pins $want"
        [ "$py-$abi-$plat" = cp311-cp311-linux_x86_64 ] || die "$name: not CPython 3.11 on linux x86_64"
        tag=$(tr '[:upper:]' '[:lower:]' <<<"${ver#*+}")
        if [ "$ver" != "${ver%%+*}" ] && [ "$tag" != "${tag#cu*torch}" ]; then  # a release wheel says what it was built for
            [ "${tag#cu"$cuda"torch"${torch%.*}"}" != "$tag" ] \
                || die "$name: built for ${tag%%cxx*}, gpu-worker.txt has CUDA $cuda and torch $torch"
        fi
        sum=$(sha256sum "$file" | cut -d' ' -f1)
        lines+="$pkg==$ver --hash=sha256:$sum"$'\n'
        files+=("$file")
    done
    for file in "${files[@]}"; do  # both checked before either is uploaded
        aws s3 cp --only-show-errors "$file" "s3://$bucket/wheels/$(basename "$file")"
    done
    {
        echo "# Written by cluster/cuda-wheels.sh publish: mamba-ssm and causal-conv1d, prebuilt for"
        echo "# gpu-worker.txt's torch $torch (CUDA $cuda), in s3://$bucket/wheels/. GPU workers install them"
        echo "# hash-checked with --no-deps (cluster.yaml); publish again after make lock moves torch."
        printf '%s' "$lines"
    } >"$kernels"
    echo "cuda-wheels: wrote $kernels; commit it"
}

fetch() {
    [ $# -eq 1 ] || die "usage: $0 fetch BUCKET"
    mkdir -p "$wheels"
    ~/venv/bin/python - "$1" "$wheels" <<'EOF'
import pathlib, sys

import boto3

bucket, dest = sys.argv[1], pathlib.Path(sys.argv[2])
s3 = boto3.client("s3")
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="wheels/"):
    for item in page.get("Contents", []):
        name = item["Key"].rsplit("/", 1)[-1]
        if name.endswith(".whl") and not (dest / name).exists():
            s3.download_file(bucket, item["Key"], str(dest / name))
EOF
    local have want
    have=$(cd "$wheels" && find . -maxdepth 1 -name '*.whl' -exec sha256sum {} + | cut -d' ' -f1)
    for want in $(hashes); do
        grep -qx "$want" <<<"$have" || die "no wheel with sha256 $want in s3://$1/wheels/: run $0 publish $1"
    done
    [ -n "$(hashes)" ] || echo "cuda-wheels: $kernels names no wheel yet: GPU workers will fail their setup" >&2
}

install() {
    [ -n "$(hashes)" ] || die "$kernels names no wheel yet: run cluster/cuda-wheels.sh publish BUCKET" \
        "(docs/cluster-aws.md); nothing is built on a worker"
    ~/venv/bin/pip install -q --require-hashes --no-deps --only-binary :all: --no-index --find-links "$wheels" \
        -r "$kernels" || die "pip installed no wheel of $kernels from $wheels (above: missing, or another hash);" \
        "the head fetches them from S3 (cluster/cuda-wheels.sh fetch)"
}

case ${1:-} in
    publish | fetch | install) "$@" ;;
    build) [ $# -le 2 ] || die "usage: $0 build [DIR]"; build "${2:-}" ;;
    *) die "usage: $0 publish BUCKET [WHEEL...] | build [DIR] | fetch BUCKET | install" ;;
esac
