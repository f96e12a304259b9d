"""What this machine has, found without TensorFlow: an NVIDIA driver, a TPU's chips, a GPU's memory.

TensorFlow-free, so that `bert_tf.script_setup` can choose TensorFlow's environment defaults before importing it;
`bert_tf.training.devices` describes a run's devices with it.
"""
import ctypes
import glob
import os

# The NVIDIA driver's files: its version and first GPU's device node on Linux, WSL 2's GPU device.
NVIDIA_DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/nvidia0", "/dev/dxg")
# A TPU VM's chips: /dev/accel<N> (TPU v2 to v4), /dev/vfio/<N> (TPU v5e and later).
TPU_DEVICE_PATTERNS = ("/dev/accel[0-9]*", "/dev/vfio/[0-9]*")
CUDA_DRIVER_LIBRARY = "libcuda.so.1"


def nvidia_driver_files():
    """The NVIDIA_DRIVER_FILES that exist here."""
    return [path for path in NVIDIA_DRIVER_FILES if os.path.exists(path)]


def tpu_device_files():
    """The TPU_DEVICE_PATTERNS files that exist here."""
    return sorted(path for pattern in TPU_DEVICE_PATTERNS for path in glob.glob(pattern))


def accelerator_present():
    """Whether this machine has an NVIDIA driver or a TPU's chips."""
    return bool(nvidia_driver_files() or tpu_device_files())


def gpu_memory_bytes(ordinal):
    """The total memory in bytes of CUDA device `ordinal` (numbered as TensorFlow's physical GPUs) from libcuda's
    cuDeviceTotalMem_v2; None where the driver does not load or answer."""
    try:
        cuda = ctypes.CDLL(CUDA_DRIVER_LIBRARY)
    except OSError:
        return None
    device, total = ctypes.c_int(), ctypes.c_size_t()
    if (cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(device), ctypes.c_int(ordinal))
            or cuda.cuDeviceTotalMem_v2(ctypes.byref(total), device)):
        return None  # a CUresult other than CUDA_SUCCESS (0)
    return total.value
