from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from cascade_formats.kernel_names import short_name

# Kernels of the API reference's examples, the shared traces and logs, and real PyTorch,
# CUTLASS, cuBLAS and Thrust builds: what uploaded traces are made of.
REAL_SYMBOLS = [
    "_Z6vecAddIfEvPT_S1_S1_i",
    "_Z8mult_gpuIfEvPT_S1_S1_ii",
    "_Z10dot_kernelIdEvPKT_S2_PS0_i",
    "_Z10mul_kernelIdEvPT_PKS0_",
    "_Z11copy_kernelIdEvPKT_PS0_",
    "_Z11init_kernelIdEvPT_S1_S1_S0_S0_S0_",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIiEESt5arrayIPcLm1EEEEviT0_T1_",
    "_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_15CUDAFunctor_addIN3c104HalfEEESt5arrayIPcLm3EEEEviT0_T1_",
    "_ZN4vllm30reshape_and_cache_flash_kernelIttLNS_18Fp8KVCacheDataTypeE0EEEvPKT_S4_PT0_S6_PKlllllliiiPKfSA_i",
    "_ZN7cutlass13device_kernelIN5flash20enable_sm90_or_laterINS1_16FlashAttnFwdSm90INS1_25CollectiveMainloopFwdSm90"
    "ILi2EN4cute5tupleIJNS5_1CILi1EEES8_S8_EEENS6_IJNS7_ILi64EEENS7_ILi192EEESA_EEELi64ENS_6half_tEfNS_4arch4Sm90ELb1"
    "ELb0ELb0ELb1ELb1ELb0ELb0ELb1ELb1ELb1ELb0ELb0ENS_10bfloat16_tELi1EEENS1_21CollectiveEpilogueFwdINS6_IJSA_SA_SB_EE"
    "ES9_SD_SF_Li128ELb1ELb1ELb0ELb0ELi1EEENS1_36VarlenDynamicPersistentTileSchedulerILi64ELi192ELi128ELi128ELb0ELb1"
    "ELb1ELb1ELb0ELb1EEEEEEEEEvNT_6ParamsE",
    "_ZN8cublasLt19splitKreduce_kernelILi32ELi16Eif6__halffS1_Lb0EfS1_S1_Lb1ELb1ELb0ELb0EEEvNS_18cublasSplitKParams"
    "IT4_EEPKT2_PKT8_PT7_PT3_PKS3_SG_PKT9_S7_PSH_PvlPS3_PiSM_SM_SG_SG_SG_SG_SG_",
    "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_23direct_copy_kernel_cudaERNS_18TensorIteratorBaseEENKU"
    "lvE0_clEvENKUlvE5_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_",
    "_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_15gpu_kernel_implINS0_22CUDAFunctorOnOther_addIbEEEEvRNS_18Tens"
    "orIteratorBaseERKT_EUliE_EEviT1_",
    "_ZN2at6native9templates4cuda21uniform_and_transformIN3c104HalfEfPNS_17CUDAGeneratorImplEZZZNS2_16bernoulli_kern"
    "elIS7_EEvRNS_18TensorIteratorBaseEdT_ENKUlvE_clEvENKUlvE6_clEvEUlfE_EEvSA_T1_T2_",
    "_ZN2at6native12_GLOBAL__N_128vectorized_layer_norm_kernelIN3c108BFloat16EfLb1EEEviT0_PKT_S8_S8_PS5_S9_PS6_",
    "_ZN2at6native51_GLOBAL__N__49690f20_18_fused_adam_impl_cu_ffd69f6925multi_tensor_apply_kernelINS1_32FusedOptimi"
    "zerTensorListMetadataILi4EEENS1_20FusedAdamMathFunctorIdLi4EEEJdddddbbPfS7_EEEvT_T0_DpT1_",
    "_ZN7cutlass7Kernel2I43cutlass_80_simt_sgemm_256x128_8x4_nn_align1EEvNT_6ParamsE",
    "_ZN6thrust8cuda_cub4core13_kernel_agentINS0_14__parallel_for16ParallelForAgentINS0_20__uninitialized_fill7func"
    "torINS_10device_ptrIiEEiEEmEES9_mEEvT0_T1_",
    "_ZN3cub17CUB_200200_800_NS11EmptyKernelIvEEvv",
]

# The rest of the grammar: scopes, std abbreviations, constructors, operators, local
# names, ABI tags, expressions in template arguments, clone suffixes.
GRAMMAR_SYMBOLS = [
    "_ZZ4mainENKUlvE_clEv",
    "_ZZ4mainENK3$_0clEv",
    "_ZZN1A3fooEvEN1B3barEv",
    "_ZZN1A3fooEvE1B",
    "_ZN3FooC2Ev",
    "_ZN3FooD0Ev",
    "_ZN1XIiEC2Ev",
    "_ZN1AC1ERKS_",
    "_ZNSaIcEC1Ev",
    "_ZNSsD1Ev",
    "_ZNSt6vectorIiSaIiEED2Ev",
    "_ZN1AIiEclEv",
    "_ZN1AplERKS_",
    "_ZN1AdlEPv",
    "_ZN1AnwEm",
    "_ZN1A3fooB5cxx11Ev",
    "_Z3foov.cold",
    "_ZN1A3barEi.isra.0",
    "_Z3bazv.constprop.0.isra.0",
    "_ZN12_GLOBAL__N_16kernelEPf",
    "_ZSt4swapIiEvRT_S1_",
    "_ZL10static_fooPi",
    "_ZNKSt5ctypeIcE8do_widenEc",
    "_ZN5Outer5InnerIiE6methodIfEEvT_",
    "_ZN1AIXplLi1ELi2EEE3fooEv",
    "_Z3fooILi4EXadL_Z3barvEEEvv",
    "_ZN1BIXstiEE1fEv",
    "_Z1fIJifEEvDpT_",
    "_ZN1AIJLi1ELi2EEE1gEv",
    "_Z1fIiEDTcl1gfp_EET_",
    "_Z3fooPFviE",
    "_Z3fooM1AFvvE",
    "_Z3fooA10_i",
    "_Z3fooDv4_f",
    "_Z3fooDF16_",
    "_Z5helloRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
]


@pytest.mark.parametrize(
    ("symbol", "name"),
    [
        ("_Z11init_kernelIdEvPT_S1_S1_S0_S0_S0_", "init_kernel"),
        (REAL_SYMBOLS[8], "reshape_and_cache_flash_kernel"),
        (REAL_SYMBOLS[9], "device_kernel"),
        (REAL_SYMBOLS[6], "vectorized_elementwise_kernel"),
        (REAL_SYMBOLS[10], "splitKreduce_kernel"),
        ("_Z6vecAddIfEvPT_S1_S1_i", "vecAdd"),
        ("_ZN2at6native12_GLOBAL__N_128vectorized_layer_norm_kernelIN3c108BFloat16EfLb1EEEviT0_PKT_S8_S8_PS5_S9_PS6_",
         "vectorized_layer_norm_kernel"),
        ("_ZZ4mainENKUlvE_clEv", "operator()"),
        ("_ZN3FooC2Ev", "Foo"),
        ("_ZN3FooD0Ev", "~Foo"),
        ("_ZNSaIcEC1Ev", "allocator"),
        ("_ZN1AdlEPv", "operator delete"),
        ("_ZN1A3fooB5cxx11Ev", "foo"),
        ("_Z3foov.cold", "foo"),
        ("_ZN1A3barEi.isra.0", "bar"),
        ("_ZN12_GLOBAL__N_16kernelEPf", "kernel"),
    ],
)
def test_short_name(symbol: str, name: str) -> None:
    assert short_name(symbol) == name


@pytest.mark.parametrize(
    "symbol",
    [
        "nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_bias_TNT",
        "triton_poi_fused_0",
        "",
        "_Z",
        "_Z6vecAddIf",  # cut short
        "_Z6vecAddIfEvPT_S1_S1_i.Cold",  # not a clone suffix
        "_Z6vecAddIfEvPT_S1_S1_iQ",  # trailing garbage
        "_Z99short",  # length past the end
        "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_9MeanOpsIfffEEjfLi4EEEEEvT1_",  # bad length
        "_ZTV3Foo",  # vtable: not a function
        "_ZN1AcviEv",  # conversion operator: needs the type spelled out
        "_ZZ4mainEs",  # string literal
        "_ZN1AUt_E",  # an unnamed type, spelled only by rendering it
        "_Z1f" + "P" * 100_000 + "i",  # deeper than the parser recurses
    ],
)
def test_unreadable_symbols_come_back_unchanged(symbol: str) -> None:
    assert short_name(symbol) == symbol


# --- agreement with c++filt -----------------------------------------------------------------


def _split_top(text: str, separator: str) -> list[str]:
    """`text` split on `separator` outside brackets of any kind."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        if text[i] in "<({[":
            depth += 1
        elif text[i] in ">)}]":
            depth -= 1
        elif depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            i += len(separator)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _strip_trailing_group(text: str, open_: str, close: str) -> str:
    if not text.endswith(close):
        return text
    depth = 0
    for j in range(len(text) - 1, -1, -1):
        depth += {close: 1, open_: -1}.get(text[j], 0)
        if depth == 0:
            return text[:j]
    raise AssertionError(f"unbalanced {open_}{close} in {text!r}")


def innermost_from_cxxfilt(demangled: str) -> str:
    """The innermost function name in c++filt's rendering of a symbol: without clone
    notes, qualifiers, parameters, template arguments, scope and return type."""
    text = re.sub(r"( \[clone [^\]]*\])+$", "", demangled)
    text = re.sub(r"( const| volatile| &&| &)+$", "", text)
    text = _strip_trailing_group(text, "(", ")")
    text = _strip_trailing_group(text, "<", ">")
    last = _split_top(text, "::")[-1]
    if not last.startswith("operator"):
        last = _split_top(last, " ")[-1]
    return re.sub(r"\[abi:[^\]]*\]", "", last)


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt is not installed")
def test_agrees_with_cxxfilt() -> None:
    symbols = REAL_SYMBOLS + GRAMMAR_SYMBOLS
    demangled = subprocess.run(
        ["c++filt"], input="\n".join(symbols) + "\n", capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(demangled) == len(symbols)
    for symbol, text in zip(symbols, demangled):
        assert text != symbol, f"c++filt could not read {symbol}"
        assert short_name(symbol) == innermost_from_cxxfilt(text), text
