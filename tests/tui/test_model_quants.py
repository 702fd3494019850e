"""A repo's GGUF files as the picker's models (one per quant, a split one as one with its
parts' sizes summed) and, per kind of offer, the largest quant it holds at the run's context
(the board's fit rule: weights + KV cache + margin)."""

from __future__ import annotations

from mvp_tui.engine.gguf_quants import HubFile, group_quants, quant_of, valid_repo
from mvp_tui.engine.gguf_shape import GgufShape
from mvp_tui.engine.model_fit import GIB
from mvp_tui.engine.quant_fit import best_quants, quant_needs, repo_fit
from tests.widgets.data import offer

# llama 3.1 8B: 32 layers, 8 KV heads of 128: 128 KiB of f16 KV cache per token.
SHAPE = GgufShape("llama", 32, 4096, 32, 8, 128, 128, 131072)


def test_quant_names_as_repos_write_them() -> None:
    assert quant_of("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf") == "Q4_K_M"
    assert quant_of("llama-2-7b.q8_0.gguf") == "Q8_0"
    assert quant_of("Qwen3-30B-A3B-UD-Q4_K_XL.gguf") == "Q4_K_XL"
    assert quant_of("gemma-3-27b-it-IQ4_XS.gguf") == "IQ4_XS"
    assert quant_of("Meta-Llama-3.1-8B-Instruct-f16.gguf") == "F16"
    assert quant_of("Q8_0/Llama-3.3-70B-Instruct-Q8_0-00001-of-00002.gguf") == "Q8_0"
    assert quant_of("Qwen2.5-7B-Instruct-Q4_K_M_imatrix.gguf") == "Q4_K_M"
    assert quant_of("tiny.gguf") == ""


def test_split_files_are_one_model_with_the_summed_size() -> None:
    files = [
        HubFile("Q8_0/Big-Q8_0-00002-of-00002.gguf", 31 * GIB),
        HubFile("Q8_0/Big-Q8_0-00001-of-00002.gguf", 37 * GIB),
        HubFile("Big-Q4_K_M.gguf", 39 * GIB),
        HubFile("Big-Q2_K-00001-of-00003.gguf", 10 * GIB),  # parts 2 and 3 missing
        HubFile("mmproj-F16.gguf", GIB),  # a vision projector: not a model
        HubFile("README.md", 4000),
        HubFile("../evil-Q4_0.gguf", GIB),  # the hub's text: never a path to serve
        HubFile("bad\x1b[2J-Q4_0.gguf", GIB),
    ]
    models = group_quants(files)
    assert [(m.label, m.size // GIB, m.parts, m.complete) for m in models] == [
        ("Q2_K", 10, 3, False), ("Q4_K_M", 39, 1, True), ("Q8_0", 68, 2, True)]
    split = models[2]
    assert split.files == ("Q8_0/Big-Q8_0-00001-of-00002.gguf",
                           "Q8_0/Big-Q8_0-00002-of-00002.gguf")
    assert split.file == split.files[0]  # what llama.cpp opens
    assert "split into 2 files" in split.unservable()
    assert "holds 1 of them" in models[0].unservable()
    assert models[1].unservable() == ""


def test_repo_ids_are_checked() -> None:
    assert valid_repo("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF")
    for bad in ("no-owner", "a/b/c", "../x", "a/..", "a/b c", "a/\x1b"):
        assert not valid_repo(bad), bad


def test_each_kind_of_offer_gets_the_largest_quant_that_fits() -> None:
    models = group_quants([
        HubFile("M-Q4_K_M.gguf", int(4.58 * GIB)),
        HubFile("M-Q8_0.gguf", int(7.95 * GIB)),
        HubFile("M-f16.gguf", int(14.97 * GIB)),
        HubFile("M-F32-00001-of-00002.gguf", 15 * GIB),  # fits 80 GB, but split: not served
        HubFile("M-F32-00002-of-00002.gguf", 15 * GIB),
    ])
    needs = quant_needs(models, SHAPE, context=8192, nodes=1)  # 1 GiB of KV cache
    assert [n.need.per_node_gb for n in needs] == [7, 10, 18, 34]
    offers = [
        offer("1", 0.10, "RTX 3060", vram_mib=8 * 1024),
        offer("2", 0.30, "RTX 3090"),  # 24 GB
        offer("3", 0.25, "RTX 3090"),  # the same kind, cheaper
        offer("4", 0.20, "RTX 3050", vram_mib=6 * 1024),
        offer("5", 1.80, "A100", vram_mib=80 * 1024),
    ]
    fits = best_quants(offers, needs)
    assert [(f.offer.offer_id, f.count, f.cell) for f in fits] == [
        ("1", 1, "Q4_K_M"), ("3", 2, "F16"), ("4", 1, "none (needs 7 GB)"), ("5", 1, "F16")]
    # A longer context grows every quant's KV cache: the 8 GB card holds none.
    longer = best_quants(offers[:1], quant_needs(models, SHAPE, context=32768, nodes=1))
    assert longer[0].cell == "none (needs 10 GB)"


def test_the_repo_fit_counts_the_kinds_that_hold_each_quant() -> None:
    models = group_quants([HubFile("M-Q4_K_M.gguf", int(4.58 * GIB)),
                           HubFile("M-f16.gguf", int(14.97 * GIB))])
    fit = repo_fit("o/m", models, SHAPE, [offer("1", 0.1, "RTX 3060", vram_mib=8 * 1024),
                                          offer("2", 0.3, "RTX 3090")],
                   context=None, nodes=1)
    assert fit.context == 4096  # the engine's default, under the model's own 131072
    assert [fit.holders(q) for q in models] == [2, 1]
    unknown = repo_fit("o/m", models, None, [], context=None, nodes=1, note="no header")
    assert unknown.needs == () and unknown.need_of(models[0]) is None and unknown.note
