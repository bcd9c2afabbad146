#!/usr/bin/env bash
# mamba-ssm and causal-conv1d, the GPU workers' CUDA kernels, as prebuilt wheels: never built on a worker.
#
#   cluster/cuda-wheels.sh publish BUCKET [WHEEL...]
#       Once, on a machine with the AWS CLI. Checks each wheel against cluster/locks (the versions
#       gpu-worker.in pins; CPython 3.11, linux x86_64; a release wheel's +cuNNtorchX.Y tag against
#       gpu-worker.txt's torch and CUDA), uploads it to s3://BUCKET/wheels/ and writes
#       cluster/locks/cuda-kernels.txt: each version and sha256. The wheels: the projects' GitHub
#       release wheels of those versions, or, with no WHEEL given, built here by `pip wheel` in a venv
#       of gpu-worker.txt (python3.11; it fetches the release wheel when there is one, else compiles:
#       a CUDA toolkit of the locked torch's CUDA, and an hour).
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

die() { echo "cuda-wheels: $*" >&2; exit 1; }
pin() { sed -n "s/^$1==\([^ ;\\]*\).*/\1/p" "$2"; }  # the version a requirements file pins for $1
hashes() { sed -n 's/^[^#].*--hash=sha256:\([0-9a-f]\{64\}\).*/\1/p' "$kernels"; }  # those cuda-kernels.txt names

build() {  # the two wheels, into $1, by pip wheel in a venv of the workers' lock
    python3.11 -m venv "$1/venv"
    "$1/venv/bin/pip" install -q --require-hashes --only-binary :all: -r "$locks/gpu-worker.txt"
    "$1/venv/bin/pip" install -q wheel  # the kernels' setup.py imports it; this machine only
    "$1/venv/bin/pip" wheel --no-deps --no-build-isolation --no-binary :all: -w "$1" \
        "mamba-ssm==$(pin mamba-ssm "$locks/gpu-worker.in")" "causal-conv1d==$(pin causal-conv1d "$locks/gpu-worker.in")"
}

publish() {
    [ $# -ge 1 ] || die "usage: $0 publish BUCKET [WHEEL...]"
    local bucket=$1 torch cuda lines="" files=() pkg want file name ver py abi plat tag sum
    shift
    torch=$(pin torch "$locks/gpu-worker.txt")
    cuda=$(sed -n 's/^nvidia-cuda-runtime\(-cu[0-9]*\)\{0,1\}==\([0-9]*\)\..*/\2/p' "$locks/gpu-worker.txt")
    if [ -z "$torch" ] || [ -z "$cuda" ]; then die "$locks/gpu-worker.txt pins no torch or CUDA runtime: run make lock"; fi
    if [ $# -eq 0 ]; then
        local dir; dir=$(mktemp -d)
        build "$dir"
        set -- "$dir"/*.whl
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
    *) die "usage: $0 publish BUCKET [WHEEL...] | fetch BUCKET | install" ;;
esac
