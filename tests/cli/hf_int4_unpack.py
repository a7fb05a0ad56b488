"""AutoGPTQ's (format v1) and AutoAWQ's (GEMM) 4-bit layouts unpacked in numpy, written from
their documented layouts and independently of folio's reader, for the tests that check the
checkpoints folio writes (quantize_gptq_test.py, synth_hf_test.py)."""
import numpy as np


def unpack_gptq(tensors, prefix):
    """AutoGPTQ QuantLinear (format v1) -> (q (out, in), zeros (groups, out), scales, g_idx)."""
    qweight = tensors[prefix + ".qweight"].view(np.uint32)  # (in / 8, out)
    q = np.stack([(qweight >> np.uint32(4 * i)) & np.uint32(15) for i in range(8)], axis=1)
    q = q.reshape(-1, qweight.shape[1]).T.astype(np.int64)  # (out, in)
    qzeros = tensors[prefix + ".qzeros"].view(np.uint32)  # (groups, out / 8)
    z = np.stack([(qzeros >> np.uint32(4 * i)) & np.uint32(15) for i in range(8)], axis=2)
    z = z.reshape(qzeros.shape[0], -1).astype(np.int64) + 1  # v1: stored zero - 1
    return q, z, tensors[prefix + ".scales"].astype(np.float32), tensors[prefix + ".g_idx"].astype(np.int64)


def unpack_awq(tensors, prefix):
    """AutoAWQ WQLinear_GEMM -> (q (out, in), zeros (groups, out), scales (groups, out))."""
    order = (0, 2, 4, 6, 1, 3, 5, 7)

    def nibbles(words):  # (rows, n / 8) -> (rows, n), output 8c + order[i] in nibble i
        words = words.view(np.uint32)
        out = np.zeros((words.shape[0], words.shape[1] * 8), np.int64)
        for i, o in enumerate(order):
            out[:, o::8] = (words >> np.uint32(4 * i)) & np.uint32(15)
        return out
    return (nibbles(tensors[prefix + ".qweight"]).T, nibbles(tensors[prefix + ".qzeros"]),
            tensors[prefix + ".scales"].astype(np.float32))


def dequantize(q, z, s, g_idx):
    return s[g_idx, :].T * (q - z[g_idx, :].T)
