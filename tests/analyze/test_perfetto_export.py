"""perfetto.json is written column at a time (engine.analyze.output.export): the same bytes as
writing it row by row — the row-by-row code it replaced is kept here as the reference, with
the slices' whole format strings (the module formats each slice in pieces, shared between a
rank's own file and its part of a job's merged file)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.analyze.options import AnalyzeOptions
from engine.analyze.output.export import _CNAME, _REGIME_TID, perfetto_json
from engine.analyze.run import read_and_analyse
from engine.regimes import Label
from engine.text import us_text, us_texts, valid_unicode
from engine.trace.evidence import Tier, tiers
from tests.paths import TRACES

_ROW = (
    '{"ph":"X","cat":"gpu","name":%s,"pid":%d,"tid":%d,"ts":%s,"dur":%s,'
    '"args":{"regime":"%s","tier":"%s","confidence":%s,"kappa":%s,"low_confidence":%s}}'
)
_RUN = (
    '{"ph":"X","cat":"regime","name":"%s","cname":"%s","pid":%d,"tid":%d,'
    '"ts":%s,"dur":%s,"args":{"segments":%d,"low_confidence":%d}}'
)


def _reference_rows(res, order) -> list[str]:
    rows, dec, names = res.rows, res.decoded, res.trace.names
    conf = dec.confidence if dec.confidence is not None else np.full(len(rows), np.nan)
    copy_or_comm = dec.labels >= Label.COMM
    row_tiers = tiers(rows, derived_evidence=res.analysis.hardware.id is not None)
    tier_names = [
        "-" if x else Tier(int(t)).name for t, x in zip(row_tiers, copy_or_comm, strict=True)
    ]
    out = []
    for i in order.tolist():
        k, c = float(dec.kappa[i]), float(conf[i])
        out.append(
            _ROW
            % (
                json.dumps(valid_unicode(names[int(rows.name[i])])),
                rows.device[i], rows.stream[i], us_text(rows.start_ns[i]),
                us_text(rows.end_ns[i] - rows.start_ns[i]), Label(int(dec.labels[i])).name,
                tier_names[i], "null" if c != c else f"{c:.3f}",
                "null" if k != k else f"{k:.4g}", "true" if dec.degenerate[i] else "false",
            )
        )  # fmt: skip
    for dev, s in sorted(set(zip(rows.device.tolist(), rows.stream.tolist(), strict=True))):
        sel = order[(rows.device[order] == dev) & (rows.stream[order] == s)]
        lab = dec.labels[sel]
        cuts = np.flatnonzero(np.diff(lab.astype(np.int16))) + 1
        for run in np.split(np.arange(len(sel)), cuts):
            first, r = sel[run[0]], Label(int(lab[run[0]]))
            a, b = int(rows.start_ns[first]), int(rows.end_ns[sel[run]].max())
            out.append(
                _RUN
                % (r.name, _CNAME[r], dev, _REGIME_TID + s, us_text(a), us_text(max(0, b - a)),
                   len(run), int(dec.degenerate[sel[run]].sum()))
            )  # fmt: skip
    return out


@pytest.mark.parametrize(
    "rel",
    [
        "kineto/a100_training_3streams.json.gz",
        "kineto/mi300x_hf_qwen15_05b_chat.json.gz",
        "kineto/b200_vllm_eager_tp8.json.gz",
        "nsys/a100_cloverleaf.sqlite",
        "kineto/mtia_inference.json.gz",
    ],
)
def test_the_export_is_the_row_by_row_one_byte_for_byte(rel):
    res = read_and_analyse(str(TRACES / rel), AnalyzeOptions(out_root=None, first_run=False))
    got = json.loads(perfetto_json(res))["traceEvents"]
    rows = res.rows
    order = np.lexsort((rows.start_ns, rows.stream, rows.device))
    want = [json.loads(x) for x in _reference_rows(res, order)]
    slices = [e for e in got if e.get("cat") in ("gpu", "regime")]
    assert len(want) > 0 and slices == want
    text = perfetto_json(res)  # and the text itself: each reference line appears as written
    for line in _reference_rows(res, order)[:: max(1, len(want) // 200)]:
        assert line in text


@given(st.lists(st.integers(-(10**15), 10**15), max_size=50))
def test_us_texts_is_us_text_of_each(ns):
    assert us_texts(np.array(ns, dtype=np.int64)) == [us_text(x) for x in ns]
