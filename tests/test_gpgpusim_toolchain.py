"""Toolchain check: the CUDA <= 11.x nvcc past the CUDA 13 wrapper trap; one-line messages."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hilsim.simmodel.gpgpusim import toolchain as T

from hilsim.core.errors import HilsimError


def _nvcc(folder: Path, release: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvcc"
    script.write_text(
        "#!/bin/sh\n"
        "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        f"echo 'Cuda compilation tools, release {release}, V{release}.89'\n"
    )
    script.chmod(0o755)
    (folder / "cuobjdump").write_text("#!/bin/sh\n")
    (folder / "cuobjdump").chmod(0o755)
    return script


def _real_tools(folder: Path) -> None:
    """Links to the machine's gcc, g++, make, bison, flex, makedepend (skip if absent)."""
    folder.mkdir(parents=True, exist_ok=True)
    for tool in ("gcc", "g++", "make", "bison", "flex", "makedepend"):
        real = shutil.which(tool)
        if real is None:
            pytest.skip(f"{tool} not installed here")
        (folder / tool).symlink_to(real)


def test_only_cuda13_is_one_line_naming_package_and_script(tmp_path: Path) -> None:
    _nvcc(tmp_path / "local", "13.0")
    with pytest.raises(HilsimError) as err:
        T.find_toolchain(path=str(tmp_path / "local"), prefer=())
    msg = str(err.value)
    assert "\n" not in msg
    assert "nvcc (CUDA <= 11.x; found only:" in msg and "is CUDA 13.0" in msg
    assert "nvidia-cuda-toolkit" in msg and str(T.SCRIPT) in msg
    # every missing build tool is in the same line with its package
    for pkg in ("bison", "flex", "xutils-dev", "build-essential"):
        assert pkg in msg


def test_prefers_cuda11_over_cuda13_first_on_path(tmp_path: Path) -> None:
    _nvcc(tmp_path / "local", "13.0")
    cuda11 = _nvcc(tmp_path / "usr", "11.8")
    _real_tools(tmp_path / "tools")
    path = os.pathsep.join([str(tmp_path / "local"), str(tmp_path / "tools")])
    tc = T.find_toolchain(path=path, prefer=[str(tmp_path / "usr")])
    assert tc.nvcc == cuda11 and tc.cuda_version == "11.8"
    assert tc.cuda_version_number == 11080 and tc.cuda_home == tmp_path
    assert tc.cuobjdump == tmp_path / "usr" / "cuobjdump"
    assert tc.path_env(path).split(os.pathsep)[0] == str(tmp_path / "usr")
    # and also when the CUDA 11 toolkit is only later on PATH
    tc2 = T.find_toolchain(path=f"{path}{os.pathsep}{tmp_path / 'usr'}", prefer=())
    assert tc2.nvcc == cuda11


def test_missing_single_tool_names_its_package(tmp_path: Path) -> None:
    _nvcc(tmp_path / "usr", "11.8")
    _real_tools(tmp_path / "tools")
    (tmp_path / "tools" / "makedepend").unlink()
    (tmp_path / "usr" / "cuobjdump").unlink()
    with pytest.raises(HilsimError) as err:
        T.find_toolchain(path=str(tmp_path / "tools"), prefer=[str(tmp_path / "usr")])
    msg = str(err.value)
    assert msg.startswith("gpgpusim toolchain: missing cuobjdump")
    assert "makedepend" in msg and "xutils-dev" in msg and "bison," not in msg
    # a run needs only nvcc, cuobjdump and gcc
    (tmp_path / "usr" / "cuobjdump").write_text("#!/bin/sh\n")
    T.find_toolchain(path=str(tmp_path / "tools"), prefer=[str(tmp_path / "usr")],
                     need_build_tools=False)


def test_version_parsers() -> None:
    assert T._version_tuple("Cuda compilation tools, release 11.8, V11.8.89") == (11, 8)
    assert T._version_tuple("nothing") is None
    gcc = shutil.which("gcc")
    if gcc:
        v = T.gcc_version(gcc)
        assert v is not None and v.count(".") == 2
