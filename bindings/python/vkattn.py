"""vkattn from Python: ctypes over the shared library libvkattn.so (no compile step).

    import vkattn
    with vkattn.Context(backend="cpu") as ctx:          # or "vulkan"
        data = vkattn.Data.load(ctx)                     # the built-in corpus
        tok = data.tokenizer
        gpt = vkattn.GPT.create(ctx, max_T=64, V=tok.vocab_size, L=2, NH=4, C=64, seed=1337)
        for step in range(20):
            inputs, targets = data.batch(B=8, T=64)
            loss = gpt.train_step(inputs, targets, B=8, T=64, lr=1e-3)  # gpt.grad_norm too
        ids = gpt.generate(tok.encode("\\n"), 100, temperature=0.8, seed=42)
        print(tok.decode(ids).decode(errors="replace"))

Token ids go in as lists, tuples, array.array of an integer type, bytes of int32 (native byte
order), or numpy integer arrays when numpy is installed; they come out as array.array("i")
(floats as array.array("f")). A str is text, not ids: GPT.generate and Session.append encode it
with the model's tokenizer (GPT.set_tokenizer), other calls refuse it.

A failing library call raises vkattn.Error with the library's message (vka_last_error). What
the binding checks itself before calling (an array of the wrong length, a value of the wrong
type or outside its C type, a name that is not one of the choices, an object or context that
was closed) raises a vkattn.Error too, VKA_ERROR_INVALID_ARGUMENT, that is also a TypeError
(wrong type) or a ValueError (the rest), naming the argument, the lengths or the choices.

The library is found from load_library's argument, else the VKATTN_LIBRARY environment
variable, else libvkattn.so.0 next to this file, else the system's search path.
Objects keep their context alive; close() (or a with block) frees one now, else the garbage
collector does; closing twice does nothing; after close() only close() works (on the object,
and on the objects of a closed Context, a closed Data's tokenizer, a closed GPT's sessions).
The structs below mirror include/vkattn.h field for field.
"""

import array
import ctypes
import ctypes.util
import numbers
import operator
import os

__all__ = ["Error", "Context", "Tokenizer", "Data", "GPT", "Session", "load_library", "version"]

# --- Structs and callbacks of include/vkattn.h ---------------------------------------------------
_c = ctypes
LOG_FN = _c.CFUNCTYPE(None, _c.c_void_p, _c.c_int, _c.c_char_p)
TOKEN_FN = _c.CFUNCTYPE(_c.c_bool, _c.c_void_p, _c.c_int32)
QUEUE_LOCK_FN = _c.CFUNCTYPE(None, _c.c_void_p, _c.c_void_p)


class vka_vulkan_env(_c.Structure):
    _fields_ = [("get_instance_proc_addr", _c.c_void_p), ("instance", _c.c_void_p),
                ("physical_device", _c.c_void_p), ("device", _c.c_void_p),
                ("queue", _c.c_void_p), ("queue_family", _c.c_uint32),
                ("api_version", _c.c_uint32), ("lock_queue", QUEUE_LOCK_FN),
                ("unlock_queue", QUEUE_LOCK_FN), ("queue_user_data", _c.c_void_p),
                ("storage_16bit", _c.c_bool), ("float16", _c.c_bool)]


class vka_host_allocator(_c.Structure):
    _fields_ = [("alloc", _c.CFUNCTYPE(_c.c_void_p, _c.c_void_p, _c.c_size_t)),
                ("realloc", _c.CFUNCTYPE(_c.c_void_p, _c.c_void_p, _c.c_void_p, _c.c_size_t)),
                ("free", _c.CFUNCTYPE(None, _c.c_void_p, _c.c_void_p)),
                ("user_data", _c.c_void_p)]


class vka_context_desc(_c.Structure):
    _fields_ = [("backend", _c.c_int), ("device", _c.c_char_p), ("validation", _c.c_int),
                ("cpu_threads", _c.c_int), ("log", LOG_FN), ("log_user_data", _c.c_void_p),
                ("log_level", _c.c_int), ("vulkan", _c.POINTER(vka_vulkan_env)),
                ("label", _c.c_char_p), ("kernels", _c.c_int),
                ("max_binding_bytes", _c.c_uint64), ("max_tensor_bytes", _c.c_uint64),
                ("max_memory_bytes", _c.c_uint64), ("vk_allocator", _c.c_void_p),
                ("host_allocator", _c.POINTER(vka_host_allocator)), ("cpu_kernels", _c.c_int)]


class vka_gpt_config(_c.Structure):
    _fields_ = [(name, _c.c_int) for name in ("max_T", "V", "Vp", "L", "NH", "C")]


class vka_adamw_desc(_c.Structure):
    _fields_ = [(name, _c.c_float)
                for name in ("lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip")] + [
                    ("grad_accum", _c.c_int)]


class vka_sample_desc(_c.Structure):
    _fields_ = [("temperature", _c.c_float), ("top_k", _c.c_int), ("seed", _c.c_uint64),
                ("no_kv_cache", _c.c_bool)]


class vka_gpt_session_desc(_c.Structure):
    _fields_ = [("max_T", _c.c_int), ("prefill_chunk", _c.c_int), ("seed", _c.c_uint64)]


MAX_GRAD_ACCUM = 65536  # VKA_GPT_MAX_GRAD_ACCUM
BACKENDS = {"vulkan": 0, "cpu": 1}
LOG_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}
SPLITS = {"train": 0, "val": 1, "all": 2}
ERROR_NAMES = {1: "VKA_TIMEOUT", -1: "VKA_ERROR_INVALID_ARGUMENT",
               -2: "VKA_ERROR_OUT_OF_HOST_MEMORY", -3: "VKA_ERROR_OUT_OF_DEVICE_MEMORY",
               -4: "VKA_ERROR_NO_VULKAN", -5: "VKA_ERROR_NO_DEVICE",
               -6: "VKA_ERROR_DEVICE_LIMIT", -7: "VKA_ERROR_VULKAN", -8: "VKA_ERROR_DEVICE_LOST",
               -9: "VKA_ERROR_IO", -10: "VKA_ERROR_FORMAT", -11: "VKA_ERROR_VOCABULARY",
               -12: "VKA_ERROR_MISMATCH", -13: "VKA_ERROR_UNSUPPORTED",
               -14: "VKA_ERROR_NOT_FINITE"}

_P = _c.c_void_p
_I32P = _c.POINTER(_c.c_int32)
_F32P = _c.POINTER(_c.c_float)
_SIGNATURES = {  # name: (restype, argtypes)
    "vka_version": (_c.c_uint32, []),
    "vka_version_string": (_c.c_char_p, []),
    "vka_result_string": (_c.c_char_p, [_c.c_int]),
    "vka_context_create": (_c.c_int, [_c.POINTER(vka_context_desc), _c.POINTER(_P)]),
    "vka_context_destroy": (None, [_P]),
    "vka_last_error": (_c.c_char_p, [_P]),
    "vka_context_backend": (_c.c_int, [_P]),
    "vka_context_validation_messages": (_c.c_uint32, [_P]),
    "vka_tokenizer_create_from_text": (_c.c_int, [_P, _c.c_char_p, _c.c_size_t, _c.POINTER(_P)]),
    "vka_tokenizer_learn": (_c.c_int, [_P, _c.c_char_p, _c.c_size_t, _c.c_int, _c.POINTER(_P)]),
    "vka_tokenizer_load": (_c.c_int, [_P, _c.c_char_p, _c.POINTER(_P)]),
    "vka_tokenizer_save": (_c.c_int, [_P, _c.c_char_p]),
    "vka_tokenizer_destroy": (None, [_P]),
    "vka_tokenizer_vocab_size": (_c.c_int, [_P]),
    "vka_tokenizer_eot": (_c.c_int32, [_P]),
    "vka_tokenizer_encode": (_c.c_int, [_P, _c.c_char_p, _c.c_size_t, _I32P,
                                        _c.POINTER(_c.c_size_t)]),
    "vka_tokenizer_decode": (_c.c_void_p, [_P, _c.c_int32, _c.POINTER(_c.c_size_t)]),
    "vka_data_load": (_c.c_int, [_P, _c.c_char_p, _P, _c.POINTER(_P)]),
    "vka_data_destroy": (None, [_P]),
    "vka_data_tokenizer": (_P, [_P]),
    "vka_data_num_tokens": (_c.c_size_t, [_P, _c.c_int]),
    "vka_data_batch": (_c.c_int, [_P, _c.c_int, _c.c_int, _c.c_int, _c.POINTER(_c.c_uint64),
                                  _I32P, _I32P]),
    "vka_gpt_create": (_c.c_int, [_P, _c.POINTER(vka_gpt_config), _c.c_uint64, _c.POINTER(_P)]),
    "vka_gpt_load": (_c.c_int, [_P, _c.c_char_p, _c.POINTER(_P)]),
    "vka_gpt_save": (_c.c_int, [_P, _c.c_char_p]),
    "vka_gpt_save_dtype": (_c.c_int, [_P, _c.c_char_p, _c.c_int]),
    "vka_gpt_set_precision": (_c.c_int, [_P, _c.c_int]),
    "vka_gpt_get_precision": (_c.c_int, [_P]),
    "vka_gpt_set_loss_scale": (_c.c_int, [_P, _c.c_float]),
    "vka_gpt_loss_scale": (_c.c_float, [_P]),
    "vka_gpt_skipped_steps": (_c.c_uint64, [_P]),
    "vka_gpt_destroy": (None, [_P]),
    "vka_gpt_set_tokenizer": (_c.c_int, [_P, _P]),
    "vka_gpt_get_config": (vka_gpt_config, [_P]),
    "vka_gpt_num_params": (_c.c_size_t, [_P]),
    "vka_gpt_get_params": (_c.c_int, [_P, _F32P, _c.c_size_t]),
    "vka_gpt_set_params": (_c.c_int, [_P, _F32P, _c.c_size_t]),
    "vka_gpt_forward": (_c.c_int, [_P, _I32P, _I32P, _c.c_int, _c.c_int, _F32P, _F32P]),
    "vka_gpt_train_step": (_c.c_int, [_P, _I32P, _I32P, _c.c_int, _c.c_int,
                                      _c.POINTER(vka_adamw_desc), _F32P, _F32P]),
    "vka_gpt_step": (_c.c_uint64, [_P]),
    "vka_gpt_generate": (_c.c_int, [_P, _I32P, _c.c_size_t, _c.c_int,
                                    _c.POINTER(vka_sample_desc), _I32P, TOKEN_FN, _c.c_void_p]),
    "vka_gpt_session_create": (_c.c_int, [_P, _c.POINTER(vka_gpt_session_desc), _c.POINTER(_P)]),
    "vka_gpt_session_destroy": (None, [_P]),
    "vka_gpt_session_append": (_c.c_int, [_P, _I32P, _c.c_size_t]),
    "vka_gpt_session_logits": (_c.c_int, [_P, _F32P, _c.c_size_t]),
    "vka_gpt_session_sample": (_c.c_int, [_P, _c.POINTER(vka_sample_desc),
                                          _c.POINTER(_c.c_uint64), _I32P]),
    "vka_gpt_session_reset": (None, [_P]),
    "vka_gpt_session_length": (_c.c_size_t, [_P]),
}

_lib = None


def load_library(path=None):
    """Load libvkattn.so (once; a later call with another path is refused). Returns the CDLL."""
    global _lib
    if _lib is not None:
        if path is not None and os.path.realpath(path) != os.path.realpath(_lib._name):
            raise RuntimeError(f"vkattn: already loaded {_lib._name}, not {path}")
        return _lib
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [path, os.environ.get("VKATTN_LIBRARY"),
                  os.path.join(here, "libvkattn.so.0"), os.path.join(here, "libvkattn.so"),
                  ctypes.util.find_library("vkattn")]
    tried = []
    for candidate in candidates:
        if not candidate or (os.sep in candidate and not os.path.exists(candidate)):
            if candidate:
                tried.append(f"{candidate} (missing)")
            continue
        lib = ctypes.CDLL(candidate)
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        _lib = lib
        return lib
    raise OSError("vkattn: libvkattn.so not found; set VKATTN_LIBRARY to its path"
                  + (f" (tried {', '.join(tried)})" if tried else ""))


def version():
    """The linked library's "major.minor.patch"."""
    return load_library().vka_version_string().decode()


class Error(Exception):
    """A vka_result failure: .result (the negative code), .name ("VKA_ERROR_IO"), .message.
    The binding's own argument checks raise it as VKA_ERROR_INVALID_ARGUMENT, then also as a
    TypeError (a wrong type) or a ValueError (a wrong length, value or choice; a closed
    object)."""

    def __init__(self, result, message):
        self.result = result
        self.name = ERROR_NAMES.get(result, str(result))
        self.message = message
        kind = load_library().vka_result_string(result).decode()
        super().__init__(f"{self.name} ({kind}): {message}" if message else f"{self.name} ({kind})")


class _ValueError(Error, ValueError):
    pass


class _TypeError(Error, TypeError):
    pass


for _cls in (_ValueError, _TypeError):  # a traceback reads "vkattn.Error: ..."
    _cls.__name__ = _cls.__qualname__ = "Error"


_INVALID = -1  # VKA_ERROR_INVALID_ARGUMENT


def _bad(message, kind=ValueError):
    """The Error of an argument the binding refuses before calling the library."""
    return (_TypeError if kind is TypeError else _ValueError)(_INVALID, message)


def _check(ctx, result):
    if result < 0:
        raise Error(result, load_library().vka_last_error(ctx).decode(errors="replace"))
    return result


def _path(p, what="path"):
    try:
        return os.fsencode(p)
    except TypeError:
        raise _bad(f"{what} must be a str, bytes or os.PathLike, not {type(p).__name__}",
                   TypeError) from None


def _text(text, what="text"):
    """The bytes of text: a str (encoded as UTF-8) or a bytes-like object."""
    if isinstance(text, str):
        return text.encode()
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise _bad(f"{what} must be a str or bytes, not {type(text).__name__}", TypeError)


def _int(value, what, lo=-2**31, hi=2**31 - 1):
    """value as a Python int in [lo, hi] (the C type's range unless narrower): ctypes would
    wrap 2**32 + 5 to 5 and refuse 2.0 with "wrong type"."""
    try:
        v = operator.index(value)
    except TypeError:
        raise _bad(f"{what} must be an int, not {type(value).__name__}", TypeError) from None
    if not lo <= v <= hi:
        raise _bad(f"{what} = {v} is outside [{lo}, {hi}]")
    return v


def _u64(value, what):
    return _int(value, what, 0, 2**64 - 1)


def _float(value, what):
    if not isinstance(value, numbers.Real):
        raise _bad(f"{what} must be a real number, not {type(value).__name__}", TypeError)
    return float(value)


def _choice(table, value, what):
    """table[value], or an Error listing table's keys."""
    try:
        return table[value]
    except (KeyError, TypeError):
        raise _bad(f"{what} = {value!r} is not one of {', '.join(map(repr, table))}") from None


def _rng_state(rng_state, what="rng_state"):
    if not isinstance(rng_state, list) or len(rng_state) != 1:
        raise _bad(f"{what} must be a list of one int (the state, advanced in place), not "
                   f"{rng_state!r}", TypeError)
    return _c.c_uint64(_u64(rng_state[0], f"{what}[0]"))


_IDS_FORMS = "a list, tuple, array.array of ints, int32 bytes or a numpy integer array"


def _int32s(values, n=None, what="ids", expected=""):
    """A ctypes int32 array (and its length) from a list, tuple, integer array.array, int32
    bytes or numpy integer array; n: the length it must have (expected: how n came about)."""
    if isinstance(values, str):
        raise _bad(f"{what} is a str: pass token ids ({_IDS_FORMS}); Tokenizer.encode(text) "
                   "gives them", TypeError)
    if isinstance(values, memoryview) and values.format in ("B", "b", "c"):
        values = values.tobytes()
    if isinstance(values, (bytes, bytearray)):
        if len(values) % 4:
            raise _bad(f"{what}: {len(values)} bytes is not a whole number of int32 (bytes are "
                       "read as native int32 token ids; text goes in as a str)")
        ids = array.array("i", bytes(values))
    else:
        dtype = getattr(values, "dtype", None)
        if dtype is not None and hasattr(values, "tobytes"):  # numpy
            if getattr(dtype, "kind", "") not in ("i", "u"):
                raise _bad(f"{what}: a numpy array of {dtype}; token ids are integers",
                           TypeError)
            values = (array.array("i", values.tobytes()) if str(dtype) == "int32" else
                      values.ravel().tolist())  # (B, T) or any shape, row-major
        elif isinstance(values, memoryview):
            values = values.tolist()
        if isinstance(values, array.array) and values.typecode == "i":
            ids = values
        else:
            try:
                ids = array.array("i", values)
            except (TypeError, OverflowError, ValueError):
                raise _bad_id(values, what) from None
    if n is not None and len(ids) != n:
        raise _bad(f"{what}: {len(ids)} ids, expected {n}{expected}")
    return (_c.c_int32 * len(ids)).from_buffer_copy(ids), len(ids)


def _bad_id(values, what):
    """The Error of the first element of values that is not an int32 (or of values itself)."""
    if isinstance(values, array.array):
        return _bad(f"{what}: an array.array('{values.typecode}'); token ids are integers",
                    TypeError)
    try:
        values = list(values)
    except TypeError:
        return _bad(f"{what} must be token ids ({_IDS_FORMS}), not {type(values).__name__}",
                    TypeError)
    for i, v in enumerate(values):
        try:
            v = operator.index(v)
        except TypeError:
            return _bad(f"{what}[{i}] = {v!r} is not an int (a token id)", TypeError)
        if not -2**31 <= v < 2**31:
            return _bad(f"{what}[{i}] = {v} does not fit an int32")
    return _bad(f"{what}: not token ids ({_IDS_FORMS})", TypeError)


def _float32s(values, n, what, expected=""):
    """A ctypes float array of exactly n values from an array.array, a sequence of numbers,
    float32 bytes or a numpy array."""
    if isinstance(values, str):
        raise _bad(f"{what} must be numbers, not a str", TypeError)
    if isinstance(values, memoryview) and values.format in ("B", "b", "c"):
        values = values.tobytes()
    if isinstance(values, (bytes, bytearray)):
        if len(values) % 4:
            raise _bad(f"{what}: {len(values)} bytes is not a whole number of float32")
        floats = array.array("f", bytes(values))
    else:
        dtype = getattr(values, "dtype", None)
        if dtype is not None and hasattr(values, "tobytes"):  # numpy
            if getattr(dtype, "kind", "") not in ("f", "i", "u"):
                raise _bad(f"{what}: a numpy array of {dtype}; expected numbers", TypeError)
            values = (array.array("f", values.tobytes()) if str(dtype) == "float32" else
                      values.ravel().tolist())
        elif isinstance(values, memoryview):
            values = values.tolist()
        if isinstance(values, array.array) and values.typecode == "f":
            floats = values
        else:
            try:
                floats = array.array("f", values)  # from an array('d') too, value by value
            except TypeError as e:
                raise _bad(f"{what} must be numbers ({e})", TypeError) from None
    if len(floats) != n:
        raise _bad(f"{what}: {len(floats)} values, expected {n}{expected}")
    return (_c.c_float * n).from_buffer_copy(floats)


def _context_handle(ctx):
    if not isinstance(ctx, Context):
        raise _bad(f"ctx must be a vkattn.Context, not {type(ctx).__name__}", TypeError)
    return ctx._handle()


class _Child:
    """An object of a context: keeps the context alive; close() destroys it once."""
    _destroy = None

    def __init__(self, ctx, handle):
        self.ctx, self._h = ctx, handle

    def close(self):
        """Destroy it now; a second close does nothing, and nothing but close works after."""
        if getattr(self, "_h", None) and _lib is not None:
            getattr(_lib, self._destroy)(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _handle(self):
        """The C handle, or an Error if this object, or what it depends on, was closed. The
        library must not see a closed object (freed), nor the objects of a destroyed context
        (only their destroy functions may be called then)."""
        kind = type(self).__name__
        if not getattr(self, "_h", None):
            raise _bad(f"this {kind} is closed")
        if not self.ctx._h:
            raise _bad(f"the Context of this {kind} is closed (close a context's objects "
                       "before it); only close() works on it now")
        return self._h

    def _check(self, result):
        return _check(self.ctx._h, result)


class Context:
    """vka_context: backend "vulkan" (default) or "cpu"; device "1" picks a Vulkan device by
    index; validation 1 or True (on), -1 or False (off), 0 (the VKATTN_VALIDATION variable);
    cpu_threads 0 = OpenMP's default; log(level_name, message) is called with the library's
    messages up to log_level ("error", "warn", "info", "debug"). A backend or log_level that is
    not one of those raises Error listing them."""

    def __init__(self, backend="vulkan", device=None, validation=0, cpu_threads=0, label=None,
                 log=None, log_level="error", library=None):
        lib = load_library(library)
        self._h = None
        self._log = None
        if isinstance(validation, bool):
            validation = 1 if validation else -1
        if _int(validation, "validation") not in (-1, 0, 1):
            raise _bad(f"validation = {validation} is not one of 1 (on), -1 (off), 0 (the "
                       "VKATTN_VALIDATION variable), True, False")
        desc = vka_context_desc(backend=_choice(BACKENDS, backend, "backend"),
                                validation=validation,
                                cpu_threads=_int(cpu_threads, "cpu_threads", 0),
                                log_level=_choice(LOG_LEVELS, log_level, "log_level"))
        if device is not None:
            desc.device = str(device).encode()
        if label is not None:
            if not isinstance(label, str):
                raise _bad(f"label must be a str, not {type(label).__name__}", TypeError)
            desc.label = label.encode()
        if log is not None:
            if not callable(log):
                raise _bad(f"log must be callable (level_name, message), not "
                           f"{type(log).__name__}", TypeError)
            names = {v: k for k, v in LOG_LEVELS.items()}
            self._log = LOG_FN(lambda _ud, level, msg: log(names.get(level, level),
                                                           msg.decode(errors="replace")))
            desc.log = self._log
        h = _c.c_void_p()
        result = lib.vka_context_create(_c.byref(desc), _c.byref(h))
        if result < 0:
            message = lib.vka_last_error(h).decode(errors="replace") if h else ""
            lib.vka_context_destroy(h)
            raise Error(result, message)
        self._h = h

    def close(self):
        """Destroy the context (its children first: close them, or drop them before this).
        A second close does nothing; its objects still alive then only answer close()."""
        if getattr(self, "_h", None) and _lib is not None:
            _lib.vka_context_destroy(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _handle(self):
        if not getattr(self, "_h", None):
            raise _bad("this Context is closed")
        return self._h

    @property
    def backend(self):
        return {v: k for k, v in BACKENDS.items()}[load_library().vka_context_backend(
            self._handle())]

    @property
    def validation_messages(self):
        return load_library().vka_context_validation_messages(self._handle())

    @property
    def last_error(self):
        return load_library().vka_last_error(self._handle()).decode(errors="replace")


class Tokenizer(_Child):
    """vka_tokenizer: character level or byte-level BPE, in llm.c's file format."""
    _destroy = "vka_tokenizer_destroy"

    def __init__(self, ctx, handle, owner=None):
        super().__init__(ctx, handle)
        self._owner = owner  # a Data whose tokenizer this is: not ours to destroy

    def close(self):
        if self._owner is None:
            super().close()
        self._h = None

    def _handle(self):
        if self._owner is not None and not self._owner._h:
            raise _bad("the Data this Tokenizer belongs to is closed")
        return super()._handle()

    @classmethod
    def from_text(cls, ctx, text):
        """A character tokenizer of the distinct bytes of text (str, as UTF-8, or bytes)."""
        raw, ch = _text(text), _context_handle(ctx)
        h = _c.c_void_p()
        _check(ch, load_library().vka_tokenizer_create_from_text(ch, raw, len(raw), _c.byref(h)))
        return cls(ctx, h)

    @classmethod
    def learn(cls, ctx, text, vocab_size):
        raw, ch = _text(text), _context_handle(ctx)
        h = _c.c_void_p()
        _check(ch, load_library().vka_tokenizer_learn(ch, raw, len(raw),
                                                      _int(vocab_size, "vocab_size"),
                                                      _c.byref(h)))
        return cls(ctx, h)

    @classmethod
    def load(cls, ctx, path):
        ch, h = _context_handle(ctx), _c.c_void_p()
        _check(ch, load_library().vka_tokenizer_load(ch, _path(path), _c.byref(h)))
        return cls(ctx, h)

    def save(self, path):
        self._check(load_library().vka_tokenizer_save(self._handle(), _path(path)))

    @property
    def vocab_size(self):
        return load_library().vka_tokenizer_vocab_size(self._handle())

    @property
    def eot(self):
        return load_library().vka_tokenizer_eot(self._handle())

    def encode(self, text):
        """Ids of text (str, encoded as UTF-8, or bytes): array('i')."""
        raw, h = _text(text), self._handle()
        out = (_c.c_int32 * max(len(raw), 1))()
        n = _c.c_size_t()
        self._check(load_library().vka_tokenizer_encode(h, raw, len(raw), out, _c.byref(n)))
        return array.array("i", out[:n.value])

    def decode(self, ids):
        """The bytes of ids (token ids as GPT.generate takes them, or one int). A BPE token may
        end inside a UTF-8 character: decode the whole."""
        lib, h, parts, n = load_library(), self._handle(), [], _c.c_size_t()
        buf, _ = _int32s([ids] if isinstance(ids, numbers.Integral) else ids, what="ids")
        for k, i in enumerate(buf):
            p = lib.vka_tokenizer_decode(h, i, _c.byref(n))
            if not p:
                raise _bad(f"ids[{k}] = {i} is not a token id of this tokenizer (0 to V-1 = "
                           f"{self.vocab_size - 1})")
            parts.append(_c.string_at(p, n.value))
        return b"".join(parts)


class Data(_Child):
    """vka_data: a text or llm.c token file (None: the built-in corpus), split 90/10. Splits:
    "train", "val", "all" (another name raises Error listing them)."""
    _destroy = "vka_data_destroy"

    @classmethod
    def load(cls, ctx, path=None, tokenizer=None):
        ch, h = _context_handle(ctx), _c.c_void_p()
        if tokenizer is not None and not isinstance(tokenizer, Tokenizer):
            raise _bad(f"tokenizer must be a vkattn.Tokenizer or None, not "
                       f"{type(tokenizer).__name__}", TypeError)
        _check(ch, load_library().vka_data_load(
            ch, None if path is None else _path(path),
            None if tokenizer is None else tokenizer._handle(), _c.byref(h)))
        data = cls(ctx, h)
        data._tok = tokenizer
        return data

    @property
    def tokenizer(self):
        h = self._handle()
        if self._tok is None:
            self._tok = Tokenizer(self.ctx, load_library().vka_data_tokenizer(h), owner=self)
        return self._tok

    def num_tokens(self, split="train"):
        return load_library().vka_data_num_tokens(self._handle(), _choice(SPLITS, split, "split"))

    def batch(self, B, T, split="train", rng_state=None):
        """(inputs, targets), each array('i') of B*T ids, from random windows; rng_state is a
        list [state] advanced in place (None: the Data's own, starting at 1)."""
        h, s = self._handle(), _choice(SPLITS, split, "split")
        B, T = _int(B, "B", 1), _int(T, "T", 1)
        if rng_state is None:
            rng_state = self.__dict__.setdefault("_rng", [1])
        state = _rng_state(rng_state)
        inputs, targets = (_c.c_int32 * (B * T))(), (_c.c_int32 * (B * T))()
        self._check(load_library().vka_data_batch(h, s, B, T, _c.byref(state), inputs, targets))
        rng_state[0] = state.value
        return array.array("i", inputs), array.array("i", targets)


class GPT(_Child):
    """vka_gpt: a GPT-2 model in llm.c's layout and checkpoint format."""
    _destroy = "vka_gpt_destroy"
    tokenizer = None  # set_tokenizer's: what generate and Session.append encode a str with

    @classmethod
    def create(cls, ctx, max_T, V, L, NH, C, Vp=0, seed=1337):
        ch = _context_handle(ctx)
        cfg = vka_gpt_config(max_T=_int(max_T, "max_T"), V=_int(V, "V"), Vp=_int(Vp, "Vp"),
                             L=_int(L, "L"), NH=_int(NH, "NH"), C=_int(C, "C"))
        h = _c.c_void_p()
        _check(ch, load_library().vka_gpt_create(ch, _c.byref(cfg), _u64(seed, "seed"),
                                                 _c.byref(h)))
        return cls(ctx, h)

    @classmethod
    def load(cls, ctx, path):
        ch, h = _context_handle(ctx), _c.c_void_p()
        _check(ch, load_library().vka_gpt_load(ch, _path(path), _c.byref(h)))
        return cls(ctx, h)

    def save(self, path, precision="fp32"):
        """Write the model as llm.c's checkpoint (vka_gpt_save_dtype): precision "fp32"
        (version 3) or "bf16" (version 5: each parameter rounded to the nearest bf16, half the
        size; vka_gpt_load and GPT.load widen it back to float32)."""
        codes = {"fp32": 0, "bf16": 1}
        if precision not in codes:
            raise _bad(f"precision must be 'fp32' or 'bf16' (llm.c's model files), not "
                       f"{precision!r}")
        self._check(load_library().vka_gpt_save_dtype(self._handle(), _path(path),
                                                      codes[precision]))

    _PRECISIONS = ("fp32", "bf16", "fp16")  # vka_dtype's order

    @property
    def precision(self):
        """The number format of the model's matrix products (vka_gpt_set_precision): "fp32"
        (the default) or "bf16" (mixed precision: bf16 copies of each linear layer's weight and
        input, float32 sums, master weights, gradients and AdamW state) or "fp16" (the same with
        fp16 copies; training steps then scale the loss dynamically). Set it to change the
        passes from now on."""
        return self._PRECISIONS[load_library().vka_gpt_get_precision(self._handle())]

    @precision.setter
    def precision(self, value):
        if not isinstance(value, str):
            raise _bad(f"precision must be a str ('fp32', 'bf16' or 'fp16'), not "
                       f"{type(value).__name__}", TypeError)
        if value not in self._PRECISIONS:
            raise _bad(f"precision must be 'fp32', 'bf16' or 'fp16', not {value!r}")
        self._check(load_library().vka_gpt_set_precision(self._handle(),
                                                         self._PRECISIONS.index(value)))

    def set_loss_scale(self, initial=0.0):
        """Dynamic loss scaling of train steps (vka_gpt_set_loss_scale, as PyTorch's GradScaler):
        0 = the precision's default (on from 2**16 for "fp16", off otherwise), a negative value =
        off, else the first scale, a power of two in [1, 2**24]."""
        self._check(load_library().vka_gpt_set_loss_scale(self._handle(), float(initial)))

    @property
    def loss_scale(self):
        """The loss scale of the next train step (1.0 when loss scaling is off)."""
        return load_library().vka_gpt_loss_scale(self._handle())

    @property
    def skipped_steps(self):
        """Train steps loss scaling skipped (their gradients overflowed)."""
        return load_library().vka_gpt_skipped_steps(self._handle())

    def set_tokenizer(self, tok):
        """Record tok (vka_gpt_set_tokenizer: its id goes into files saved from now on; its
        vocabulary size must be V) as the tokenizer that generate and Session.append encode a
        str prompt with; None forgets it."""
        if tok is not None and not isinstance(tok, Tokenizer):
            raise _bad(f"tok must be a vkattn.Tokenizer or None, not {type(tok).__name__}",
                       TypeError)
        h = self._handle()
        self._check(load_library().vka_gpt_set_tokenizer(h, None if tok is None else
                                                          tok._handle()))
        self.tokenizer = tok

    def _prompt_ids(self, prompt, what):
        """prompt as token ids: a str is encoded with the model's tokenizer."""
        if not isinstance(prompt, str):
            return _int32s(prompt, what=what)
        if self.tokenizer is None:
            raise _bad(f"{what} is a str but this GPT has no tokenizer: pass token ids "
                       "(tok.encode(text)) or call gpt.set_tokenizer(tok) first", TypeError)
        return _int32s(self.tokenizer.encode(prompt), what=what)

    @property
    def config(self):
        """{"max_T", "V", "Vp", "L", "NH", "C"}."""
        cfg = load_library().vka_gpt_get_config(self._handle())
        return {name: getattr(cfg, name) for name, _ in vka_gpt_config._fields_}

    @property
    def num_params(self):
        return load_library().vka_gpt_num_params(self._handle())

    @property
    def step(self):
        return load_library().vka_gpt_step(self._handle())

    def get_params(self):
        """All num_params parameters in the checkpoint's order: array('f')."""
        h, n = self._handle(), self.num_params
        out = array.array("f", bytes(4 * n))
        ptr = (_c.c_float * n).from_buffer(out)
        self._check(load_library().vka_gpt_get_params(h, ptr, n))
        del ptr
        return out

    def set_params(self, values):
        """Set all parameters from exactly num_params values in get_params's order (array('f'),
        any sequence of numbers, float32 bytes or a numpy array); another count raises Error
        naming both."""
        h, n = self._handle(), self.num_params
        buf = _float32s(values, n, "set_params", " (the model's num_params)")
        self._check(load_library().vka_gpt_set_params(h, buf, n))

    def _batch(self, inputs, targets, B, T, what="B*T", rows=1):
        """inputs and targets (may be None) as B*T ids, and B and T; T None = len(inputs) / B."""
        inp, n = _int32s(inputs, what="inputs")
        B = _int(B, "B", 1)
        if T is None:
            if n % B:
                raise _bad(f"inputs: {n} ids is not a whole number of rows of B = {B}")
            T = n // B
        T = _int(T, "T", 1)
        expected = f" ({what} = {B}*{T})" if what == "B*T" else f" ({what} = {B // rows}*{T}*{rows})"
        inp, _ = _int32s(inp, B * T, "inputs", expected)
        tgt = None if targets is None else _int32s(targets, B * T, "targets", expected)[0]
        return inp, tgt, B, T

    def forward(self, inputs, targets=None, B=1, T=None, logits=False):
        """Mean cross-entropy over (B, T) (None without targets); with logits=True also the
        (B, T, V) logits as a flat array('f'): (loss, logits). inputs and targets hold B*T ids
        (T None: len(inputs) / B); a target of -1 counts for nothing."""
        h = self._handle()
        inp, tgt, B, T = self._batch(inputs, targets, B, T)
        loss = _c.c_float()
        out = (_c.c_float * (B * T * self.config["V"]))() if logits else None
        self._check(load_library().vka_gpt_forward(h, inp, tgt, B, T,
                                                   None if tgt is None else _c.byref(loss), out))
        result = None if tgt is None else loss.value
        return (result, array.array("f", out)) if logits else result

    def train_step(self, inputs, targets, B, T, lr, beta1=0.0, beta2=0.0, eps=0.0,
                   weight_decay=0.0, grad_clip=0.0, grad_accum=1):
        """One AdamW step on B*T inputs and targets (0 = the library's defaults: 0.9, 0.999,
        1e-8; no decay or clipping): returns the loss before the update; .grad_norm is then the
        gradient norm before clipping. grad_accum = N > 1: inputs and targets hold N*B*T ids,
        run as N micro-batches of B rows (rows k*B .. (k+1)*B-1 the k-th) whose gradients are
        summed before the one update: the step on the N*B rows up to summation order, in the
        activation memory of B (vka_adamw_desc.grad_accum); 0 or 1 = none."""
        h = self._handle()
        N = _int(grad_accum, "grad_accum", 0, MAX_GRAD_ACCUM)
        B = _int(B, "B", 1)
        inp, tgt, _, T = self._batch(inputs, targets, B * max(N, 1), T,
                                     *(("B*T*grad_accum", N) if N > 1 else ()))
        if tgt is None:
            raise _bad("targets must be token ids, not None", TypeError)
        opt = vka_adamw_desc(lr=_float(lr, "lr"), beta1=_float(beta1, "beta1"),
                             beta2=_float(beta2, "beta2"), eps=_float(eps, "eps"),
                             weight_decay=_float(weight_decay, "weight_decay"),
                             grad_clip=_float(grad_clip, "grad_clip"), grad_accum=N)
        loss, norm = _c.c_float(), _c.c_float()
        self._check(load_library().vka_gpt_train_step(h, inp, tgt, B, T, _c.byref(opt),
                                                      _c.byref(loss), _c.byref(norm)))
        self.grad_norm = norm.value
        return loss.value

    def generate(self, prompt, n_new, temperature=1.0, top_k=0, seed=0, no_kv_cache=False,
                 on_token=None):
        """Continue prompt by up to n_new tokens: array('i') of the new ids (tok.decode gives
        their text). prompt: token ids, or a str, encoded with the tokenizer set_tokenizer gave
        the model (without one a str raises Error: pass tok.encode(text)). on_token(id) is
        called with each; returning False stops early."""
        h = self._handle()
        ids, n = self._prompt_ids(prompt, "prompt")
        sample = vka_sample_desc(temperature=_float(temperature, "temperature"),
                                 top_k=_int(top_k, "top_k"), seed=_u64(seed, "seed"),
                                 no_kv_cache=bool(no_kv_cache))
        out, raised = array.array("i"), []

        def token(_ud, tok):
            out.append(tok)
            if on_token is None:
                return True
            try:
                return on_token(tok) is not False
            except BaseException as e:  # an exception must not cross the C frames
                raised.append(e)
                return False

        fn = TOKEN_FN(token)  # the ids come through it: no n_new-sized buffer to allocate
        self._check(load_library().vka_gpt_generate(h, ids, n, _int(n_new, "n_new"),
                                                    _c.byref(sample), None, fn, None))
        if raised:
            raise raised[0]
        return out


class Session(_Child):
    """vka_gpt_session: a KV cache driven token by token. It keeps its model alive; close it
    before the model (or let both go); once the model is closed only close() works."""
    _destroy = "vka_gpt_session_destroy"

    def __init__(self, gpt, max_T=0, prefill_chunk=0, seed=0):
        if not isinstance(gpt, GPT):
            raise _bad(f"gpt must be a vkattn.GPT, not {type(gpt).__name__}", TypeError)
        gh = gpt._handle()
        desc = vka_gpt_session_desc(max_T=_int(max_T, "max_T"),
                                    prefill_chunk=_int(prefill_chunk, "prefill_chunk"),
                                    seed=_u64(seed, "seed"))
        h = _c.c_void_p()
        _check(gpt.ctx._h, load_library().vka_gpt_session_create(gh, _c.byref(desc),
                                                                 _c.byref(h)))
        super().__init__(gpt.ctx, h)
        self.gpt = gpt

    def _handle(self):
        if getattr(self, "_h", None) and not self.gpt._h:
            raise _bad("the GPT of this Session is closed; only close() works on it now")
        return super()._handle()

    def append(self, ids):
        """Append token ids, or a str encoded with the model's tokenizer (GPT.generate)."""
        h = self._handle()
        buf, n = self.gpt._prompt_ids(ids, "ids")
        self._check(load_library().vka_gpt_session_append(h, buf, n))

    def logits(self):
        """Next-token logits after the last appended token: array('f') of V."""
        h = self._handle()
        V = self.gpt.config["V"]
        out = (_c.c_float * V)()
        self._check(load_library().vka_gpt_session_logits(h, out, V))
        return array.array("f", out)

    def sample(self, temperature=0.0, top_k=0, seed=0, rng_state=None):
        """The next token (not appended): greedy at temperature 0; rng_state a list [state]
        advanced in place, else the session's own RNG (its seed)."""
        h = self._handle()
        sample = vka_sample_desc(temperature=_float(temperature, "temperature"),
                                 top_k=_int(top_k, "top_k"), seed=_u64(seed, "seed"))
        tok = _c.c_int32()
        state = None if rng_state is None else _rng_state(rng_state)
        self._check(load_library().vka_gpt_session_sample(
            h, _c.byref(sample), None if state is None else _c.byref(state), _c.byref(tok)))
        if state is not None:
            rng_state[0] = state.value
        return tok.value

    def reset(self):
        load_library().vka_gpt_session_reset(self._handle())

    def __len__(self):
        return load_library().vka_gpt_session_length(self._handle())
