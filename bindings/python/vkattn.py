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

Token ids go in as lists, tuples, array.array("i"), bytes of int32 (native byte order), or
numpy arrays when numpy is installed; they come out as array.array("i") (floats as
array.array("f")). A failing call raises vkattn.Error with the library's message
(vka_last_error). The library is found from load_library's argument, else the VKATTN_LIBRARY
environment variable, else libvkattn.so.0 next to this file, else the system's search path.
Objects keep their context alive; close() (or a with block) frees one now, else the garbage
collector does. The structs below mirror include/vkattn.h field for field.
"""

import array
import ctypes
import ctypes.util
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
                ("unlock_queue", QUEUE_LOCK_FN), ("queue_user_data", _c.c_void_p)]


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
                for name in ("lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip")]


class vka_sample_desc(_c.Structure):
    _fields_ = [("temperature", _c.c_float), ("top_k", _c.c_int), ("seed", _c.c_uint64),
                ("no_kv_cache", _c.c_bool)]


class vka_gpt_session_desc(_c.Structure):
    _fields_ = [("max_T", _c.c_int), ("prefill_chunk", _c.c_int), ("seed", _c.c_uint64)]


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
    "vka_gpt_destroy": (None, [_P]),
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
    """A vka_result failure: .result (the negative code), .name ("VKA_ERROR_IO"), .message."""

    def __init__(self, result, message):
        self.result = result
        self.name = ERROR_NAMES.get(result, str(result))
        self.message = message
        kind = load_library().vka_result_string(result).decode()
        super().__init__(f"{self.name} ({kind}): {message}" if message else f"{self.name} ({kind})")


def _check(ctx, result):
    if result < 0:
        raise Error(result, load_library().vka_last_error(ctx).decode(errors="replace"))
    return result


def _path(p):
    return os.fsencode(p)


def _int32s(values, n=None, what="ids"):
    """A ctypes int32 array (and its length) from a list, array('i'), int32 bytes or numpy."""
    if isinstance(values, (bytes, bytearray, memoryview)) and not (
            isinstance(values, memoryview) and values.itemsize == 4):
        raw = bytes(values)
        if len(raw) % 4:
            raise ValueError(f"{what}: {len(raw)} bytes is not a whole number of int32")
        buf = (_c.c_int32 * (len(raw) // 4)).from_buffer_copy(raw)
    else:
        if str(getattr(values, "dtype", "")) == "int32":  # numpy int32: its bytes as they are
            values = array.array("i", values.tobytes())
        elif hasattr(values, "tolist") and not isinstance(values, array.array):
            values = values.tolist()  # numpy, of any integer type
            if values and isinstance(values[0], list):
                values = [v for row in values for v in row]
        if isinstance(values, array.array) and values.itemsize == 4 and values.typecode in "il":
            buf = (_c.c_int32 * len(values)).from_buffer_copy(values)
        else:
            values = list(values)
            for i, v in enumerate(values):  # ctypes would wrap 2**32 + 5 to 5 silently
                if not -2**31 <= v < 2**31:
                    raise OverflowError(f"{what}[{i}] = {v} does not fit an int32")
            buf = (_c.c_int32 * len(values))(*values)
    if n is not None and len(buf) != n:
        raise ValueError(f"{what}: {len(buf)} ids, expected {n}")
    return buf, len(buf)


class _Child:
    """An object of a context: keeps the context alive; close() destroys it once."""
    _destroy = None

    def __init__(self, ctx, handle):
        self.ctx, self._h = ctx, handle

    def close(self):
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

    def _check(self, result):
        return _check(self.ctx._h, result)


class Context:
    """vka_context: backend "cpu" or "vulkan"; device "1" picks a Vulkan device by index;
    validation 1 / -1 / 0 (the VKATTN_VALIDATION variable); log(level_name, message) is called
    with the library's messages up to log_level."""

    def __init__(self, backend="vulkan", device=None, validation=0, cpu_threads=0, label=None,
                 log=None, log_level="error", library=None):
        lib = load_library(library)
        self._h = None
        self._log = None
        desc = vka_context_desc(backend=BACKENDS[backend], validation=validation,
                                cpu_threads=cpu_threads, log_level=LOG_LEVELS[log_level])
        if device is not None:
            desc.device = str(device).encode()
        if label is not None:
            desc.label = label.encode()
        if log is not None:
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
        """Destroy the context (its children first: close them, or drop them before this)."""
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

    @property
    def backend(self):
        return {v: k for k, v in BACKENDS.items()}[load_library().vka_context_backend(self._h)]

    @property
    def validation_messages(self):
        return load_library().vka_context_validation_messages(self._h)

    @property
    def last_error(self):
        return load_library().vka_last_error(self._h).decode(errors="replace")


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

    @classmethod
    def from_text(cls, ctx, text):
        raw = text.encode() if isinstance(text, str) else bytes(text)
        h = _c.c_void_p()
        _check(ctx._h, load_library().vka_tokenizer_create_from_text(ctx._h, raw, len(raw),
                                                                     _c.byref(h)))
        return cls(ctx, h)

    @classmethod
    def learn(cls, ctx, text, vocab_size):
        raw = text.encode() if isinstance(text, str) else bytes(text)
        h = _c.c_void_p()
        _check(ctx._h, load_library().vka_tokenizer_learn(ctx._h, raw, len(raw), vocab_size,
                                                          _c.byref(h)))
        return cls(ctx, h)

    @classmethod
    def load(cls, ctx, path):
        h = _c.c_void_p()
        _check(ctx._h, load_library().vka_tokenizer_load(ctx._h, _path(path), _c.byref(h)))
        return cls(ctx, h)

    def save(self, path):
        self._check(load_library().vka_tokenizer_save(self._h, _path(path)))

    @property
    def vocab_size(self):
        return load_library().vka_tokenizer_vocab_size(self._h)

    @property
    def eot(self):
        return load_library().vka_tokenizer_eot(self._h)

    def encode(self, text):
        """Ids of text (str, encoded as UTF-8, or bytes): array('i')."""
        raw = text.encode() if isinstance(text, str) else bytes(text)
        out = (_c.c_int32 * max(len(raw), 1))()
        n = _c.c_size_t()
        self._check(load_library().vka_tokenizer_encode(self._h, raw, len(raw), out, _c.byref(n)))
        return array.array("i", out[:n.value])

    def decode(self, ids):
        """The bytes of ids (a BPE token may end inside a UTF-8 character: decode the whole)."""
        lib, parts, n = load_library(), [], _c.c_size_t()
        for i in (ids if not isinstance(ids, int) else [ids]):
            p = lib.vka_tokenizer_decode(self._h, int(i), _c.byref(n))
            if not p:
                raise ValueError(f"token id {i} outside [0, {self.vocab_size})")
            parts.append(_c.string_at(p, n.value))
        return b"".join(parts)


class Data(_Child):
    """vka_data: a text or llm.c token file (None: the built-in corpus), split 90/10."""
    _destroy = "vka_data_destroy"

    @classmethod
    def load(cls, ctx, path=None, tokenizer=None):
        h = _c.c_void_p()
        _check(ctx._h, load_library().vka_data_load(
            ctx._h, None if path is None else _path(path),
            None if tokenizer is None else tokenizer._h, _c.byref(h)))
        data = cls(ctx, h)
        data._tok = tokenizer
        return data

    @property
    def tokenizer(self):
        if self._tok is None:
            self._tok = Tokenizer(self.ctx, load_library().vka_data_tokenizer(self._h), owner=self)
        return self._tok

    def num_tokens(self, split="train"):
        return load_library().vka_data_num_tokens(self._h, SPLITS[split])

    def batch(self, B, T, split="train", rng_state=None):
        """(inputs, targets), each array('i') of B*T ids, from random windows; rng_state is a
        list [state] advanced in place (None: the Data's own, starting at 1)."""
        if rng_state is None:
            rng_state = self.__dict__.setdefault("_rng", [1])
        state = _c.c_uint64(rng_state[0])
        inputs, targets = (_c.c_int32 * (B * T))(), (_c.c_int32 * (B * T))()
        self._check(load_library().vka_data_batch(self._h, SPLITS[split], B, T, _c.byref(state),
                                                  inputs, targets))
        rng_state[0] = state.value
        return array.array("i", inputs), array.array("i", targets)


class GPT(_Child):
    """vka_gpt: a GPT-2 model in llm.c's layout and checkpoint format."""
    _destroy = "vka_gpt_destroy"

    @classmethod
    def create(cls, ctx, max_T, V, L, NH, C, Vp=0, seed=1337):
        cfg = vka_gpt_config(max_T=max_T, V=V, Vp=Vp, L=L, NH=NH, C=C)
        h = _c.c_void_p()
        _check(ctx._h, load_library().vka_gpt_create(ctx._h, _c.byref(cfg), seed, _c.byref(h)))
        return cls(ctx, h)

    @classmethod
    def load(cls, ctx, path):
        h = _c.c_void_p()
        _check(ctx._h, load_library().vka_gpt_load(ctx._h, _path(path), _c.byref(h)))
        return cls(ctx, h)

    def save(self, path):
        self._check(load_library().vka_gpt_save(self._h, _path(path)))

    @property
    def config(self):
        """{"max_T", "V", "Vp", "L", "NH", "C"}."""
        cfg = load_library().vka_gpt_get_config(self._h)
        return {name: getattr(cfg, name) for name, _ in vka_gpt_config._fields_}

    @property
    def num_params(self):
        return load_library().vka_gpt_num_params(self._h)

    @property
    def step(self):
        return load_library().vka_gpt_step(self._h)

    def get_params(self):
        """All parameters in the checkpoint's order: array('f')."""
        n = self.num_params
        out = array.array("f", bytes(4 * n))
        ptr = (_c.c_float * n).from_buffer(out)
        self._check(load_library().vka_gpt_get_params(self._h, ptr, n))
        del ptr
        return out

    def set_params(self, values):
        n = self.num_params
        buf = (_c.c_float * n)(*values) if not isinstance(values, array.array) else \
            (_c.c_float * n).from_buffer_copy(values)
        self._check(load_library().vka_gpt_set_params(self._h, buf, n))

    def forward(self, inputs, targets=None, B=1, T=None, logits=False):
        """Mean cross-entropy over (B, T) (None without targets); with logits=True also the
        (B, T, V) logits as a flat array('f'): (loss, logits)."""
        inp, n = _int32s(inputs, what="inputs")
        T = n // B if T is None else T
        inp, _ = _int32s(inp, B * T, "inputs")
        tgt = None if targets is None else _int32s(targets, B * T, "targets")[0]
        loss = _c.c_float()
        out = (_c.c_float * (B * T * self.config["V"]))() if logits else None
        self._check(load_library().vka_gpt_forward(self._h, inp, tgt, B, T,
                                                   None if tgt is None else _c.byref(loss), out))
        result = None if tgt is None else loss.value
        return (result, array.array("f", out)) if logits else result

    def train_step(self, inputs, targets, B, T, lr, beta1=0.0, beta2=0.0, eps=0.0,
                   weight_decay=0.0, grad_clip=0.0):
        """One AdamW step (0 = the library's defaults: 0.9, 0.999, 1e-8; no decay or
        clipping): returns the loss before the update; .grad_norm is then the gradient norm
        before clipping."""
        inp, _ = _int32s(inputs, B * T, "inputs")
        tgt, _ = _int32s(targets, B * T, "targets")
        opt = vka_adamw_desc(lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                             weight_decay=weight_decay, grad_clip=grad_clip)
        loss, norm = _c.c_float(), _c.c_float()
        self._check(load_library().vka_gpt_train_step(self._h, inp, tgt, B, T, _c.byref(opt),
                                                      _c.byref(loss), _c.byref(norm)))
        self.grad_norm = norm.value
        return loss.value

    def generate(self, prompt, n_new, temperature=1.0, top_k=0, seed=0, no_kv_cache=False,
                 on_token=None):
        """Continue prompt by up to n_new tokens: array('i'). on_token(id) is called with each;
        returning False stops early."""
        ids, n = _int32s(prompt, what="prompt")
        sample = vka_sample_desc(temperature=temperature, top_k=top_k, seed=seed,
                                 no_kv_cache=no_kv_cache)
        out = (_c.c_int32 * max(n_new, 1))()
        count, raised = [0], []

        def token(_ud, tok):
            count[0] += 1
            if on_token is None:
                return True
            try:
                return on_token(tok) is not False
            except BaseException as e:  # an exception must not cross the C frames
                raised.append(e)
                return False

        fn = TOKEN_FN(token)
        self._check(load_library().vka_gpt_generate(self._h, ids, n, n_new, _c.byref(sample),
                                                    out, fn, None))
        if raised:
            raise raised[0]
        return array.array("i", out[:count[0]])


class Session(_Child):
    """vka_gpt_session: a KV cache driven token by token. It keeps its model alive; close it
    before the model (or let both go)."""
    _destroy = "vka_gpt_session_destroy"

    def __init__(self, gpt, max_T=0, prefill_chunk=0, seed=0):
        desc = vka_gpt_session_desc(max_T=max_T, prefill_chunk=prefill_chunk, seed=seed)
        h = _c.c_void_p()
        _check(gpt.ctx._h, load_library().vka_gpt_session_create(gpt._h, _c.byref(desc),
                                                                 _c.byref(h)))
        super().__init__(gpt.ctx, h)
        self.gpt = gpt

    def append(self, ids):
        buf, n = _int32s(ids)
        self._check(load_library().vka_gpt_session_append(self._h, buf, n))

    def logits(self):
        """Next-token logits after the last appended token: array('f') of V."""
        V = self.gpt.config["V"]
        out = (_c.c_float * V)()
        self._check(load_library().vka_gpt_session_logits(self._h, out, V))
        return array.array("f", out)

    def sample(self, temperature=0.0, top_k=0, seed=0, rng_state=None):
        """The next token (not appended): greedy at temperature 0; rng_state a list [state]
        advanced in place, else the session's own RNG (its seed)."""
        sample = vka_sample_desc(temperature=temperature, top_k=top_k, seed=seed)
        tok = _c.c_int32()
        state = None if rng_state is None else _c.c_uint64(rng_state[0])
        self._check(load_library().vka_gpt_session_sample(
            self._h, _c.byref(sample), None if state is None else _c.byref(state), _c.byref(tok)))
        if state is not None:
            rng_state[0] = state.value
        return tok.value

    def reset(self):
        load_library().vka_gpt_session_reset(self._h)

    def __len__(self):
        return load_library().vka_gpt_session_length(self._h)
