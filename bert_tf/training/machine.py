"""What this machine has (an NVIDIA driver, a TPU's chips, a GPU's memory), found without TensorFlow so that
`bert_tf.script_setup` can choose TensorFlow's environment defaults before importing it."""
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


def accelerator_present():
    """Whether this machine has an NVIDIA driver or a TPU's chips."""
    return bool(nvidia_driver_files() or any(glob.glob(pattern) for pattern in TPU_DEVICE_PATTERNS))


def gpu_memory_bytes(ordinal):
    """CUDA device `ordinal`'s memory in bytes (cuDeviceTotalMem_v2); None where the driver does not answer."""
    try:
        cuda = ctypes.CDLL(CUDA_DRIVER_LIBRARY)
    except OSError:
        return None
    device, total = ctypes.c_int(), ctypes.c_size_t()
    if (cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(device), ctypes.c_int(ordinal))
            or cuda.cuDeviceTotalMem_v2(ctypes.byref(total), device)):
        return None  # a CUresult other than CUDA_SUCCESS (0)
    return total.value
