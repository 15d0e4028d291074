"""Which records stand behind each figure the reference run stores (reference/<card>/figures/*.png).

A stored figure once outlived its records: reference/h200 kept the TensorRT-RTX engine-size figure after
its `trt_rtx.*` records were dropped, so the figure showed what nothing stored could back. Each figure a
notebook saves is declared here with the record-name prefix its data comes from, or None with the reason
it has none (a diagram, a curve computed from math or from a model on the CPU, not a measurement).
`orphan_figures(folder)` lists the figures of a reference folder that are undeclared or have no records.

Serves: tooling — `make gpu-report` (the stored reference) and tests/tools/test_report_figures.py.
"""

from __future__ import annotations

from pathlib import Path

from helpers import bench

COMPUTED = None  # a figure drawn from computation, not from stored measurements

# figure file name (without .png) -> the prefix of the records it shows, or COMPUTED
FIGURE_RECORDS: dict[str, str | None] = {
    # 01
    "ch01_bert_base_latency": "ch01.bert_base.", "ch01_resnet50_latency": "ch01.resnet50.",
    "ch01_tiny_mlp_latency": "ch01.tiny_mlp.",
    # 02
    "ch02_gemm_throughput": "ch02.gemm_tflops.", "Roofline_GPU_measured_": "ch02.roofline.",
    # 03
    "Copy_kernels_torch_D2D_copy": "ch03.copy_gbs.", "Offset_copy": "ch03.offset_gbs",
    "Strided_copy_bandwidth_relative_to_stride_1": "ch03.stride_gbs", "Transpose_tiled_copy": "ch03.transpose",
    "Stencil_loads_useful_GB_s_": "ch03.readonly_gbs.",
    # 04
    "ch04_bandwidth_vs_block_size": "ch04.blocksize_gbs.", "ch04_bandwidth_vs_shared_memory_per_block": "ch04.smem_gbs.",
    "Shared_memory_per_block_caps_resident_warps": "ch04.smem_occupancy.", "Sum_of_64M_floats": "ch04.reduce_gbs.",
    "Divergence_time_all-path-A_time": "ch04.divergence_",
    # 05, 05b: the quantization grid and error curves are math; the channel ranges are a tiny MLP's weights
    "ch05_gemm_tops": "ch05.gemm.", "ch05_grid": COMPUTED, "ch05_grid_asym": COMPUTED, "ch05_sqnr_vs_bits": COMPUTED,
    "ch05_channel_ranges": COMPUTED, "ch05b.sqnr_vs_bits": COMPUTED,
    # 06: activation histograms and calibration curves of a model's activations
    "ch06_histograms": COMPUTED, "ch06_curves": COMPUTED, "input_of_layer_2": COMPUTED, "input_of_layer_4": COMPUTED,
    # 07, 08
    "ch07_resnet_table": "ch07.int8_acc.", "ch07_mobilenet_table": "ch07.int8_acc.",
    "ch07_mixed_precision": "ch07.mixed_precision.", "ch08_qat_curve": "qat.delta_pts", "ch08_ste": COMPUTED,
    # 09
    "ch09_bert": "ch09.bert.", "ch09_ort_cpu": "ch09.gpu_host_cpu.", "ch09_trt_rtx_engine_size": "trt_rtx.",
    "ch09_engine_bert_parts": "ch09.timeline.", "ch09_engine_bert_timeline": "ch09.timeline.",
    "ch09_engine_resnet_parts": "ch09.timeline.", "ch09_engine_resnet_timeline": "ch09.timeline.",
    "BERT-base_seq_128_batch_32": "ch09.engine.bert.", "ResNet-50_batch_256": "ch09.engine.resnet50.",
    # 10, 11
    "ch10_mixed_precision": "ch10.mixed", "Running_activation_scale_per_batch": "ch10.dynamic.",
    "Nsight_Compute_summary_stored_GPU_run_": "ch11.ncu.",
    # 12: the tiny LM's training curve and activation ranges are computed on the CPU-trained model
    "Batch-1_GEMV_at_LLaMA-7B_shapes_speed_over_FP16_cuBLAS": "ch12.gemv.", "Batch_sweep_on_the_roofline": "ch12.batch.",
    "Decode_tokens_s_7B-shaped_stack_batch_1": "ch12.decode.", "ch12_decode_batch": "ch12.decode.batch.",
    "ch12_decode_timeline": "ch12.timeline.decode.", "ch12_decode_parts": "ch12.timeline.decode.",
    "ch01_e2e_timeline": "ch01.timeline.", "ch01_e2e_parts": "ch01.timeline.",
    "ch03_stride_timeline": "ch03.timeline.", "ch03_stride_parts": "ch03.timeline.",
    "ch10_overlap_timeline": "ch10.timeline.", "ch10_overlap_parts": "ch10.timeline.", "One_11008_4096_layer_at_batch_M": "ch12.sweep.",
    "Tiny_LM_training_on_the_stdlib_text": COMPUTED, "Attention_input_of_block_0_outlier_made_on_purpose": COMPUTED,
    # labs
    "Lab_11_FP32_GEMMs_under_the_FP32_roof_TFLOP_s_": "lab11.", "Lab_11_INT8_GEMMs_under_the_INT8_roof_TOPS_": "lab11.",
}


def figure_problem(figure: Path, names: set[str]) -> str | None:
    """Why a stored figure has nothing behind it (given the record names stored beside it), or None."""
    stem = figure.stem
    if stem not in FIGURE_RECORDS:
        return (f"{figure.name} is not declared in helpers.tools.report_figures.FIGURE_RECORDS: name the records "
                "it shows (or COMPUTED), or delete the figure")
    prefix = FIGURE_RECORDS[stem]
    if prefix is not COMPUTED and not any(n.startswith(prefix) for n in names):
        return (f"{figure.name} shows {prefix}* records, and none is stored in {figure.parent.parent.name}/"
                "results.json: store them again (re-run the notebook) or delete the figure")
    return None


def orphan_figures(folder: Path) -> list[str]:
    """Problems of a reference folder's figures: each undeclared figure, and each with no records behind it."""
    results = folder / "results.json"
    names = {r.name for r in bench.load_records(results)} if results.is_file() else set()
    return [p for f in sorted((folder / "figures").glob("*.png")) if (p := figure_problem(f, names))]
