"""A variant an installed package declares in the entry-point group `hwm.protocols` (docs/variants.md):
a package written in tmp_path and installed in development mode (setuptools writes its metadata,
entry points included, beside its code, which goes on the path: what `pip install -e` does, offline)
is listed by `hwm protocols` and named by its entry point's name in hwm check. Under `pytest -m deep`, the
same package is installed by pip into a fresh virtual environment, and hwm run from there finds it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def package(tmp_path) -> Path:
    """The folder of the package `installed_team_rules`, its metadata written: on the path, it is installed."""
    package = tmp_path / "installed-team-rules"
    (package / "installed_team_rules").mkdir(parents=True)
    (package / "installed_team_rules" / "__init__.py").write_text("")
    shutil.copy(ROOT / "examples" / "variants" / "flexible.py", package / "installed_team_rules" / "quorums.py")
    (package / "installed_team_rules" / "broken.py").write_text("NotAVariant = 3\n")
    (package / "pyproject.toml").write_text(textwrap.dedent('''
        [project]
        name = "installed-team-rules"
        version = "0.1"

        [project.entry-points."hwm.protocols"]
        team-flexible = "installed_team_rules.quorums:Flexible"
        team-not-a-variant = "installed_team_rules.broken:NotAVariant"
    '''))
    (package / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info"], cwd=package, check=True, capture_output=True)
    return package


def hwm(*args: str):
    return CliRunner().invoke(main, list(args))


def test_an_installed_variant_is_listed_and_named_by_its_entry_point(package, monkeypatch):
    assert "team-flexible" not in hwm("protocols").output  # not installed yet
    monkeypatch.syspath_prepend(str(package))
    listed = hwm("protocols")
    assert listed.exit_code == 0, listed.output
    assert listed.output.split("Installed variants (--protocol NAME):\n")[1].splitlines()[:2] == [
        "  team-flexible                   installed_team_rules.quorums:Flexible",
        "  team-not-a-variant              installed_team_rules.broken:NotAVariant"]
    checked = hwm("check", "--protocol", "team-flexible", "--servers", "4", "--max-generation", "3",
                  "--max-crashes", "0")
    assert checked.exit_code == 0, checked.output
    assert "protocol Flexible" in checked.output
    assert "explored 1,441 distinct states, 9,999 transitions" in checked.output
    refused = hwm("check", "--protocol", "team-not-a-variant")
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert refused.output.strip().splitlines()[-1] == (
        "Error: Invalid value for '--protocol': entry point 'team-not-a-variant' "
        "(installed_team_rules.broken:NotAVariant) is not a variant (a subclass of hwm.model.variant.Variant)")


@pytest.mark.deep
def test_a_variant_pip_installed_in_a_fresh_venv_is_found_by_its_entry_point(package, tmp_path):
    """A real `pip install` of the package into a new virtual environment (pip builds it as it builds
    any package: setuptools from the package index, in isolation). hwm comes from the checkout's
    environment, which a .pth file adds to the new one's path; the entry point is found only in the
    metadata pip wrote there."""
    for egg_info in package.glob("*.egg-info"):  # the metadata the fixture wrote for the offline test
        shutil.rmtree(egg_info)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    python = venv / "bin" / "python"
    site_packages = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip()
    hwm_site = next(p for p in sys.path if p.endswith("site-packages") and (Path(p) / "click").is_dir())
    Path(site_packages, "hwm_checkout.pth").write_text(f"import site; site.addsitedir({hwm_site!r})\n")
    hwm_cli = [str(python), "-c", "from hwm.cli import main; main(prog_name='hwm')"]
    before = subprocess.run(hwm_cli + ["protocols"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert before.returncode == 0, before.stderr
    assert "team-flexible" not in before.stdout
    installed = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--disable-pip-version-check",
                                str(package)],
                               capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "Successfully installed installed-team-rules-0.1" in installed.stdout
    listed = subprocess.run(hwm_cli + ["protocols"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "  team-flexible                   installed_team_rules.quorums:Flexible" in listed.stdout.splitlines()
    checked = subprocess.run(hwm_cli + ["check", "--protocol", "team-flexible", "--servers", "4", "--max-generation",
                                        "3", "--max-crashes", "0"], capture_output=True, text=True, timeout=300,
                             cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "protocol Flexible" in checked.stdout
    assert "explored 1,441 distinct states, 9,999 transitions" in checked.stdout
    # The package's module is the installed copy, not the folder it was built from.
    where = subprocess.run([str(python), "-c", "import installed_team_rules.quorums as q; print(q.__file__)"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert where.stdout.strip().startswith(site_packages), where.stdout
