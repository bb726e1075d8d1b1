"""tools/equivalence.py can tell a refit that matches its baseline from one that does not."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

TOOL = Path(__file__).resolve().parents[1] / "tools" / "equivalence.py"
CASE = "ttest__weston__dask"


def _tool():
    spec = importlib.util.spec_from_file_location("fsdask_equivalence_tool", TOOL)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.filterwarnings("ignore:.*Zarr V3 specification")
def test_save_compare_and_a_perturbed_result_fails(tmp_path, capsys):
    tool = _tool()
    assert CASE in [c[0] for c in tool.cases()]
    assert tool.main(["save", str(tmp_path), "--only", CASE]) == 0
    assert tool.main(["compare", str(tmp_path), "--only", CASE]) == 0
    assert "1 bit-identical" in capsys.readouterr().out

    # one weight off by 1e-9 relative: beyond the 1e-12 tolerance, the selection unchanged
    store = tmp_path / f"{CASE}.zarr"
    saved = xr.open_zarr(store, consolidated=False).load()
    w = saved["weight"].values.copy()
    j = int(np.argmax(np.abs(w)))
    w[j] *= 1 + 1e-9
    saved["weight"] = ("feature", w)
    saved.to_zarr(store, mode="w", consolidated=False)
    assert tool.main(["compare", str(tmp_path), "--only", CASE]) == 1
    out = capsys.readouterr().out
    assert f"DIFF {CASE}: result_['weight']: max relative difference" in out

    # a changed selection fails too, and names the array
    with np.load(tmp_path / f"{CASE}.npz") as d:
        arrays = dict(d)
    arrays["support_"] = ~arrays["support_"]
    np.savez(tmp_path / f"{CASE}.npz", **arrays)
    assert tool.main(["compare", str(tmp_path), "--only", CASE]) == 1
    assert f"DIFF {CASE}: support_:" in capsys.readouterr().out
