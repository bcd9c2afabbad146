"""What the docs and comments say of the GPU install agrees with the pins it comes from: every kernel release-wheel
URL written anywhere is one upstream publishes for gpu-worker.in's versions, and the CUDA that gpu_ready's hints say
`make` installs is the CUDA of the locked torch."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cluster.test_cluster_locks import lock, pins
from tests.cluster.test_gpu_install import RELEASES, release_wheel_url
from tuning.cluster.gpu_ready import MAKE_TORCH_CUDA

ROOT = Path(__file__).resolve().parents[2]
WRITTEN_IN = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "cluster" / "cuda-wheels.sh",
              ROOT / "cluster" / "locks" / "gpu-worker.in"]
# a URL may be folded over two comment lines ("#     https://.../v1.7.0/" then "#       name.whl")
URL = re.compile(r"(https://github\.com/\S+/releases/download/v[^/\s]+/)(?:\s*#?\s*)?([\w.+-]+\.whl)")


def written_wheel_urls() -> dict[str, set[str]]:
    """Each kernel release-wheel URL written in the docs, README, cuda-wheels.sh and gpu-worker.in -> where."""
    found: dict[str, set[str]] = {}
    for path in WRITTEN_IN:
        for base, name in URL.findall(path.read_text()):
            found.setdefault(base + name, set()).add(path.name)
    return found


def test_every_written_kernel_wheel_url_is_a_release_wheel_of_the_pinned_versions():
    published = {release_wheel_url(package, cuda) for package in RELEASES for cuda in (12, 13)}
    written = written_wheel_urls()
    assert {"gpus.md", "gpu-worker.in"} <= set().union(*written.values())  # the pattern finds what is there
    assert {url: where for url, where in written.items() if url not in published} == {}
    assert not URL.search("https://github.com/state-spaces/mamba/releases/download/v2.3.2.post1/")  # a name is needed


def test_make_torch_cuda_for_kernel_cuda_12_is_the_locked_torch_cuda():
    runtime = pins(lock("gpu-worker.txt"))["nvidia-cuda-runtime-cu12"]
    assert MAKE_TORCH_CUDA["12"] == f"{runtime.major}.{runtime.minor}"
