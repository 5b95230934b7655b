"""The Python binding on both backends (ctest: test_python, label "python").

Run: VKATTN_LIBRARY=build/libvkattn.so.0 python3 bindings/python/test_vkattn.py
A missing Vulkan device skips the Vulkan cases, unless VKATTN_REQUIRE_GPU=1 (then it fails).
"""

import array
import math
import os
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vkattn  # noqa: E402

try:
    import numpy
except ImportError:
    numpy = None

B, T = 2, 8
CFG = dict(max_T=16, L=2, NH=2, C=32)


def open_context(backend):
    try:
        return vkattn.Context(backend=backend, validation=1 if backend == "vulkan" else 0)
    except vkattn.Error as e:
        if backend == "vulkan" and os.environ.get("VKATTN_REQUIRE_GPU") != "1" and e.name in (
                "VKA_ERROR_NO_VULKAN", "VKA_ERROR_NO_DEVICE", "VKA_ERROR_UNSUPPORTED"):
            raise unittest.SkipTest(f"no Vulkan device: {e}")
        raise


class Backend:
    """The cases, run once per backend (the subclasses below)."""
    backend = None

    def setUp(self):
        self.ctx = open_context(self.backend)
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        if self.backend == "vulkan":
            self.assertEqual(self.ctx.validation_messages, 0, "validation-layer messages")
        self.ctx.close()
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def model(self, V, seed=7):
        return vkattn.GPT.create(self.ctx, V=V, seed=seed, **CFG)

    def test_python_tokenizer_save_load_encode_decode(self):
        text = "To be, or not to be: that is the question.\n"
        tok = vkattn.Tokenizer.from_text(self.ctx, text)
        self.assertEqual(tok.vocab_size, len(set(text.encode())))
        tok.save(self.path("tok.bin"))
        loaded = vkattn.Tokenizer.load(self.ctx, self.path("tok.bin"))
        ids = loaded.encode("not to be")
        self.assertEqual(len(ids), 9)
        self.assertEqual(loaded.decode(ids), b"not to be")
        with self.assertRaises(vkattn.Error) as e:
            loaded.encode("xyz")  # 'x', 'y', 'z' are not in the text
        self.assertEqual(e.exception.name, "VKA_ERROR_VOCABULARY")

    def test_python_gpt_save_load_generate_train(self):
        data = vkattn.Data.load(self.ctx)  # the built-in corpus
        tok = data.tokenizer
        V = tok.vocab_size
        gpt = self.model(V)
        self.assertEqual(gpt.config["V"], V)
        gpt.save(self.path("model.bin"))
        loaded = vkattn.GPT.load(self.ctx, self.path("model.bin"))
        self.assertEqual(loaded.config, gpt.config)
        self.assertEqual(loaded.get_params(), gpt.get_params())
        # bf16 (llm.c's version 5): half the bytes, each parameter rounded to nearest even
        gpt.save(self.path("model16.bin"), precision="bf16")
        n = len(gpt.get_params())
        self.assertEqual(os.path.getsize(self.path("model16.bin")), 1024 + 2 * n)
        p16 = vkattn.GPT.load(self.ctx, self.path("model16.bin")).get_params()
        for x, y in zip(list(gpt.get_params())[:2000], list(p16)[:2000]):
            u = struct.unpack("<I", struct.pack("<f", x))[0]
            r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
            self.assertEqual(struct.unpack("<f", struct.pack("<I", r))[0], y)
        with self.assertRaises(vkattn.Error) as e:
            gpt.save(self.path("x.bin"), precision="fp16")
        self.assertIn("'fp32' or 'bf16'", str(e.exception))
        # mixed precision: bf16 products, float32 master weights; the precision is the model's
        self.assertEqual(gpt.precision, "fp32")
        gpt.precision = "bf16"
        self.assertEqual(gpt.precision, "bf16")
        gpt.precision = "fp16"
        self.assertEqual(gpt.precision, "fp16")
        self.assertEqual(gpt.loss_scale, 65536.0)  # fp16's default loss scaling
        gpt.set_loss_scale(-1)
        self.assertEqual(gpt.loss_scale, 1.0)
        gpt.set_loss_scale(1024)
        self.assertEqual(gpt.loss_scale, 1024.0)
        with self.assertRaises(vkattn.Error) as e:
            gpt.set_loss_scale(3)
        self.assertIn("power of two", str(e.exception))
        gpt.set_loss_scale(0)
        self.assertEqual(gpt.skipped_steps, 0)
        with self.assertRaises(TypeError):
            gpt.precision = None
        with self.assertRaises(vkattn.Error) as e:
            gpt.precision = "int8"
        self.assertIn("'fp32', 'bf16' or 'fp16'", str(e.exception))
        self.assertEqual(gpt.precision, "fp16")
        gpt.precision = "fp32"

        prompt = tok.encode("\n")
        ids = loaded.generate(prompt, 20, temperature=1.0, seed=3)
        self.assertEqual(len(ids), 20)
        self.assertTrue(all(0 <= i < V for i in ids), f"ids outside [0, {V}): {list(ids)}")
        self.assertEqual(loaded.generate(prompt, 20, temperature=1.0, seed=3), ids)
        seen = []
        stopped = loaded.generate(prompt, 20, seed=3, on_token=lambda t: seen.append(t) or
                                  len(seen) < 5)
        self.assertEqual(list(stopped), list(ids[:5]))

        # One batch, eight steps: the loss on it must go down. Inputs in every accepted form.
        inputs, targets = data.batch(B, T)
        forms = [list(inputs), inputs, inputs.tobytes(), tuple(inputs)]
        if numpy is not None:
            forms.append(numpy.array(inputs, dtype=numpy.int64))
        losses = []
        for step in range(8):
            losses.append(loaded.train_step(forms[step % len(forms)], targets, B, T, lr=1e-2))
            self.assertTrue(math.isfinite(losses[-1]) and math.isfinite(loaded.grad_norm))
        self.assertEqual(loaded.step, 8)
        self.assertLess(losses[-1], losses[0] - 0.1, f"losses {losses}")
        after = loaded.forward(inputs, targets, B, T)
        self.assertLess(after, losses[-1])
        loss, logits = loaded.forward(inputs, None, B, T, logits=True)
        self.assertIsNone(loss)
        self.assertEqual(len(logits), B * T * V)
        self.assertTrue(all(0 <= i < V for i in loaded.generate(prompt, 10, seed=1)))

        # Greedy decoding through a session equals greedy generation.
        greedy = loaded.generate(prompt, 12, temperature=0.0)
        sess = vkattn.Session(loaded)
        sess.append(prompt)
        by_session = []
        for _ in range(12):
            logits = sess.logits()
            token = sess.sample()
            self.assertEqual(token, max(range(V), key=logits.__getitem__))
            by_session.append(token)
            sess.append([token])
        self.assertEqual(by_session, list(greedy))
        self.assertEqual(len(sess), len(prompt) + 12)
        sess.reset()
        self.assertEqual(len(sess), 0)
        with self.assertRaises(vkattn.Error) as e:
            sess.append([V])  # an id outside [0, V)
        self.assertEqual(e.exception.name, "VKA_ERROR_INVALID_ARGUMENT")
        for obj in (sess, loaded, gpt, data):
            obj.close()

    def test_python_errors_carry_the_message(self):
        missing = self.path("missing.bin")
        with self.assertRaises(vkattn.Error) as e:
            vkattn.GPT.load(self.ctx, missing)
        self.assertEqual(e.exception.name, "VKA_ERROR_IO")
        self.assertIn("missing.bin", str(e.exception))
        gpt = self.model(V=10)
        with self.assertRaises(vkattn.Error) as e:
            gpt.train_step([10] * (B * T), [0] * (B * T), B, T, lr=1e-3)  # id 10 >= V
        self.assertEqual(e.exception.name, "VKA_ERROR_INVALID_ARGUMENT")
        self.assertIn("10", e.exception.message)
        with self.assertRaises(ValueError):
            gpt.train_step([0] * 3, [0] * 3, B, T, lr=1e-3)  # not B*T ids
        gpt.close()


    def assertBinding(self, kind, fn, *parts):
        """fn() raises a vkattn.Error that is also a kind (ValueError, TypeError), VKA_ERROR_
        INVALID_ARGUMENT, whose message contains each of parts. Returns the message."""
        with self.assertRaises(vkattn.Error) as e:
            fn()
        self.assertIsInstance(e.exception, kind)
        self.assertEqual(e.exception.name, "VKA_ERROR_INVALID_ARGUMENT")
        for part in parts:
            self.assertIn(str(part), e.exception.message)
        return e.exception.message

    def test_python_set_params_takes_exactly_num_params(self):
        gpt = self.model(V=10)
        n = gpt.num_params
        before = gpt.get_params()
        for k in (0, 10, n - 1, n + 1, 2 * n):
            for form in ([0.5] * k, array.array("f", [0.5] * k), bytes(4 * k)):
                self.assertBinding(ValueError, lambda: gpt.set_params(form), k, n)
        self.assertEqual(gpt.get_params(), before, "a refused set_params changed the model")
        self.assertBinding(ValueError, lambda: gpt.set_params(bytes(4 * n + 2)), 4 * n + 2)
        self.assertBinding(TypeError, lambda: gpt.set_params("0.5" * n), "str")
        self.assertBinding(TypeError, lambda: gpt.set_params(["x"] * n))
        self.assertBinding(TypeError, lambda: gpt.set_params(None))
        # Every accepted form sets every parameter (an array('d') was copied as raw bytes).
        values = [((i * 7919) % 1000 - 500) / 4096 for i in range(n)]
        expected = array.array("f", values)
        for form in (values, tuple(values), array.array("d", values), expected,
                     expected.tobytes()):
            gpt.set_params(array.array("f", [0.0] * n))
            gpt.set_params(form)
            self.assertEqual(gpt.get_params(), expected, f"set_params({type(form).__name__})")
        gpt.close()

    def test_python_grad_accum_matches_one_big_batch(self):
        # grad_accum=3 on B=1 rows each: the step of B=3 up to summation order; losses within
        # 1e-6 relative.
        V, T3 = 19, 11
        ids = [(i * 7 + 3) % V for i in range(3 * T3)]
        tgt = [(i * 5 + 1) % V for i in ids]
        tgt[T3:2 * T3] = [-1] * T3  # micro-batch 1 ignored: dloss is 1 / the count of all 3
        big, acc = self.model(V), self.model(V)
        for step in range(5):
            a = big.train_step(ids, tgt, 3, T3, lr=1e-2, grad_clip=1.0)
            b = acc.train_step(ids, tgt, 1, T3, lr=1e-2, grad_clip=1.0, grad_accum=3)
            self.assertLessEqual(abs(a - b), 1e-6 * abs(a), f"step {step}: {a} vs {b}")
        self.assertEqual(acc.step, 5)
        pa, pb = big.get_params(), acc.get_params()
        num = sum((x - y) ** 2 for x, y in zip(pa, pb))
        den = sum(x * x for x in pa)
        # loose: the attention's key biases, whose exact gradient is 0, take AdamW steps on
        # rounding noise (test_grad_accum leaves them out and bounds the rest by 1e-6)
        self.assertLessEqual(math.sqrt(num / den), 1e-4)
        # N*B*T ids, named; grad_accum's range
        self.assertBinding(ValueError, lambda: acc.train_step(ids[:2 * T3], tgt[:2 * T3], 1, T3,
                                                              lr=1e-3, grad_accum=3), 2 * T3)
        self.assertBinding(ValueError, lambda: acc.train_step(ids, tgt, 1, T3, lr=1e-3,
                                                              grad_accum=-1), "grad_accum")
        self.assertBinding(TypeError, lambda: acc.train_step(ids, tgt, 1, T3, lr=1e-3,
                                                             grad_accum=2.0), "grad_accum")
        big.close()
        acc.close()

    def test_python_token_arrays_lengths_and_types(self):
        V = 10
        gpt = self.model(V)
        ok = [1] * (B * T)
        # Lengths: both named, for inputs and targets, forward and train_step.
        for k in (0, 3, B * T - 1, B * T + 1):
            self.assertBinding(ValueError, lambda: gpt.train_step([1] * k, ok, B, T, lr=1e-3),
                               f"{k} ids", B * T)
            self.assertBinding(ValueError, lambda: gpt.train_step(ok, [1] * k, B, T, lr=1e-3),
                               "targets", f"{k} ids", B * T)
            self.assertBinding(ValueError, lambda: gpt.forward(ok, [1] * k, B, T), "targets",
                               f"{k} ids", B * T)
        self.assertBinding(ValueError, lambda: gpt.forward([1] * 5, B=2), "5", "B = 2")
        self.assertBinding(ValueError, lambda: gpt.forward([1] * 4, B=0), "B = 0")
        self.assertBinding(ValueError, lambda: gpt.forward([], B=1), "T = 0")
        # Types: float ids in any container, no ids at all, ids beyond int32.
        sess = vkattn.Session(gpt)
        for bad in ([1.5] * (B * T), array.array("f", [1.0] * (B * T)),
                    array.array("d", [1.0] * (B * T)), [None] * (B * T), ["1"] * (B * T),
                    [[1] * T] * B, None, 3, 2.0, object()):
            for call in (lambda: gpt.train_step(bad, ok, B, T, lr=1e-3),
                         lambda: gpt.train_step(ok, bad, B, T, lr=1e-3),  # None: no targets
                         lambda: gpt.forward(bad, ok, B, T),
                         lambda: gpt.generate(bad, 2),
                         lambda: sess.append(bad)):
                self.assertBinding(TypeError, call)
        self.assertBinding(ValueError, lambda: gpt.generate([2**32 + 1], 2), 2**32 + 1, "int32")
        self.assertBinding(ValueError, lambda: gpt.generate(b"\n", 2), "1 bytes", "str")
        # Token ids outside [0, V): the library names the id (targets may be -1: padding).
        for bad_id in (-1, V, 2**31 - 1):
            for call in (lambda: gpt.generate([1, bad_id], 2),
                         lambda: gpt.forward([bad_id] + ok[1:], None, B, T),
                         lambda: sess.append([bad_id])):
                with self.assertRaises(vkattn.Error) as e:
                    call()
                self.assertEqual(e.exception.name, "VKA_ERROR_INVALID_ARGUMENT")
                self.assertIn(str(bad_id), e.exception.message)
        self.assertTrue(math.isfinite(gpt.forward(ok, [-1] + ok[1:], B, T)))
        # Every accepted form of ids gives the same loss.
        loss = gpt.forward(ok, ok, B, T)
        for form in (tuple(ok), array.array("i", ok), array.array("q", ok),
                     array.array("H", ok), array.array("i", ok).tobytes(),
                     memoryview(array.array("i", ok))):
            self.assertEqual(gpt.forward(form, ok, B, T), loss, type(form).__name__)
        if numpy is not None:
            for dtype in (numpy.int32, numpy.int64, numpy.uint16):
                self.assertEqual(gpt.forward(numpy.array(ok, dtype).reshape(B, T), ok, B, T),
                                 loss)
            self.assertBinding(TypeError, lambda: gpt.forward(numpy.array(ok, float), ok, B, T),
                               "float64")
        # The other integer arguments: their type, and their C type's range (no wrapping).
        self.assertBinding(TypeError, lambda: gpt.train_step(ok, ok, float(B), T, lr=1e-3), "B")
        self.assertBinding(TypeError, lambda: gpt.generate([1], 2.0), "n_new")
        self.assertBinding(TypeError, lambda: gpt.train_step(ok, ok, B, T, lr="0.1"), "lr")
        self.assertBinding(ValueError, lambda: gpt.generate([1], 2, seed=-1), "seed = -1")
        self.assertBinding(ValueError, lambda: gpt.generate([1], 2**32 + 2), "n_new")
        self.assertBinding(ValueError, lambda: vkattn.GPT.create(
            self.ctx, max_T=2**32 + 16, V=V, L=1, NH=2, C=32), "max_T", 2**32 + 16)
        self.assertBinding(ValueError, lambda: vkattn.Session(gpt, max_T=2**32 + 4), "max_T")
        # The tokenizer: text is a str or bytes; ids are ints in [0, V).
        tok = vkattn.Tokenizer.from_text(self.ctx, "abcdefghij")
        self.assertEqual(tok.decode([0, 1]), b"ab")
        self.assertBinding(TypeError, lambda: tok.decode([1.7]), "1.7")
        self.assertBinding(TypeError, lambda: tok.decode("ab"), "str")
        for bad_id in (-1, 10):
            self.assertBinding(ValueError, lambda: tok.decode([0, bad_id]), f"ids[1] = {bad_id}",
                               "0 to V-1 = 9")
        for bad in (5, [97, 98], None):
            self.assertBinding(TypeError, lambda: tok.encode(bad), type(bad).__name__)
            self.assertBinding(TypeError, lambda: vkattn.Tokenizer.from_text(self.ctx, bad))
        self.assertBinding(TypeError, lambda: vkattn.Tokenizer.learn(self.ctx, "ab", 2.5))
        self.assertBinding(TypeError, lambda: vkattn.GPT.load(self.ctx, 7), "path")
        self.assertBinding(TypeError, lambda: vkattn.GPT.create(None, V=V, **CFG), "Context")
        self.assertBinding(TypeError, lambda: vkattn.Session("gpt"), "GPT")
        # Data: B and T, the RNG state.
        data = vkattn.Data.load(self.ctx)
        self.assertBinding(TypeError, lambda: data.batch(2.0, T), "B")
        self.assertBinding(ValueError, lambda: data.batch(0, T), "B = 0")
        self.assertBinding(TypeError, lambda: data.batch(B, T, rng_state=5), "rng_state")
        self.assertBinding(ValueError, lambda: data.batch(B, T, rng_state=[-1]), "rng_state")
        self.assertBinding(TypeError, lambda: vkattn.Data.load(self.ctx, tokenizer="tok"))
        for obj in (data, tok, sess, gpt):
            obj.close()

    def test_python_bad_split_lists_the_splits(self):
        data = vkattn.Data.load(self.ctx)
        for call in (lambda: data.num_tokens("test"), lambda: data.batch(B, T, split="dev"),
                     lambda: data.num_tokens(["train"])):
            self.assertBinding(ValueError, call, "'train', 'val', 'all'")
        self.assertGreater(data.num_tokens("val"), 0)
        data.close()

    def test_python_str_prompt_needs_the_models_tokenizer(self):
        data = vkattn.Data.load(self.ctx)
        tok = data.tokenizer
        gpt = self.model(tok.vocab_size)
        text = "The cat"
        for call in (lambda: gpt.generate(text, 4), lambda: vkattn.Session(gpt).append(text)):
            self.assertBinding(TypeError, call, "str", "token ids", "set_tokenizer")
        other = vkattn.Tokenizer.from_text(self.ctx, "abc")
        with self.assertRaises(vkattn.Error) as e:
            gpt.set_tokenizer(other)  # 3 tokens, not V
        self.assertIn("V = ", e.exception.message)
        self.assertIsNone(gpt.tokenizer)
        self.assertBinding(TypeError, lambda: gpt.set_tokenizer("tok"), "Tokenizer")
        gpt.set_tokenizer(tok)
        self.assertIs(gpt.tokenizer, tok)
        ids = tok.encode(text)
        self.assertEqual(gpt.generate(text, 6, seed=5), gpt.generate(ids, 6, seed=5))
        by_text, by_ids = vkattn.Session(gpt), vkattn.Session(gpt)
        by_text.append(text)
        by_ids.append(ids)
        self.assertEqual(len(by_text), len(ids))
        self.assertEqual(by_text.logits(), by_ids.logits())
        # Text is for prompts only; training and scoring take ids.
        self.assertBinding(TypeError, lambda: gpt.forward(text), "str")
        gpt.set_tokenizer(None)
        self.assertBinding(TypeError, lambda: gpt.generate(text, 4), "set_tokenizer")
        for obj in (by_text, by_ids, other, gpt, data):
            obj.close()

    def test_python_closed_objects_raise_a_clear_error(self):
        ctx = open_context(self.backend)
        data = vkattn.Data.load(ctx)
        tok = data.tokenizer
        V = tok.vocab_size
        own_tok = vkattn.Tokenizer.from_text(ctx, "abc")
        gpt = vkattn.GPT.create(ctx, V=V, seed=3, **CFG)
        sess = vkattn.Session(gpt)
        sess.append([1, 2])
        inputs, targets = data.batch(B, T)
        calls = {  # every public method and property of each, with good arguments
            "Context": [lambda: ctx.backend, lambda: ctx.validation_messages,
                        lambda: ctx.last_error, lambda: vkattn.GPT.create(ctx, V=5, **CFG),
                        lambda: vkattn.GPT.load(ctx, self.path("m.bin")),
                        lambda: vkattn.Data.load(ctx), lambda: vkattn.Tokenizer.from_text(ctx, "a"),
                        lambda: vkattn.Tokenizer.learn(ctx, "ab" * 50, 258),
                        lambda: vkattn.Tokenizer.load(ctx, self.path("t.bin"))],
            "Data": [lambda: data.tokenizer, lambda: data.num_tokens(),
                     lambda: data.batch(B, T)],
            "Tokenizer": [lambda: t.vocab_size, lambda: t.eot, lambda: t.encode("a"),
                          lambda: t.decode([0]), lambda: t.save(self.path("t.bin"))],
            "GPT": [lambda: gpt.config, lambda: gpt.num_params, lambda: gpt.step,
                    lambda: gpt.get_params(), lambda: gpt.set_params([0.0] * 4),
                    lambda: gpt.save(self.path("m.bin")), lambda: gpt.set_tokenizer(None),
                    lambda: gpt.forward(inputs, targets, B, T),
                    lambda: gpt.train_step(inputs, targets, B, T, lr=1e-3),
                    lambda: gpt.generate([1], 2), lambda: vkattn.Session(gpt)],
            "Session": [lambda: sess.append([1]), lambda: sess.logits(), lambda: sess.sample(),
                        lambda: sess.reset(), lambda: len(sess)],
        }

        def all_refused(kinds, *parts):
            for kind in kinds:
                for call in calls[kind]:
                    message = self.assertBinding(ValueError, call, "closed", *parts)
                    self.assertTrue(message)

        # A closed Data: its own tokenizer goes with it (a tokenizer passed in does not).
        t = tok
        data.close()
        all_refused(["Data"], "this Data")
        all_refused(["Tokenizer"], "Data this Tokenizer belongs to")
        t = own_tok
        self.assertEqual(t.vocab_size, 3)
        # A closed GPT: its sessions too.
        gpt.close()
        all_refused(["GPT"], "this GPT")
        all_refused(["Session"], "GPT of this Session")
        sess.close()
        all_refused(["Session"], "this Session")
        # A closed Context: every object still alive answers only close().
        gpt = vkattn.GPT.create(ctx, V=V, seed=3, **CFG)
        sess = vkattn.Session(gpt)
        if self.backend == "vulkan":
            self.assertEqual(ctx.validation_messages, 0, "validation-layer messages")
        ctx.close()
        all_refused(["Context"], "this Context")
        all_refused(["GPT", "Session", "Tokenizer"], "the Context of this")
        for obj in (sess, gpt, own_tok, tok, data, ctx):  # closing twice does nothing
            obj.close()
            obj.close()

class TestCPU(Backend, unittest.TestCase):
    backend = "cpu"


class TestVulkan(Backend, unittest.TestCase):
    backend = "vulkan"


class TestChoices(unittest.TestCase):
    def test_python_bad_backend_or_option_lists_the_choices(self):
        for kwargs, parts in (({"backend": "cuda"}, ("'cuda'", "'vulkan', 'cpu'")),
                              ({"backend": None}, ("None", "'vulkan', 'cpu'")),
                              ({"backend": ["cpu"]}, ("'vulkan', 'cpu'",)),
                              ({"backend": "cpu", "log_level": "loud"},
                               ("'loud'", "'error', 'warn', 'info', 'debug'")),
                              ({"backend": "cpu", "validation": 5}, ("5", "1 (on)", "-1 (off)")),
                              ({"backend": "cpu", "cpu_threads": -1}, ("cpu_threads",))):
            with self.assertRaises(vkattn.Error, msg=str(kwargs)) as e:
                vkattn.Context(**kwargs)
            self.assertIsInstance(e.exception, ValueError)
            self.assertEqual(e.exception.name, "VKA_ERROR_INVALID_ARGUMENT")
            for part in parts:
                self.assertIn(part, e.exception.message)
        for kwargs in ({"backend": "cpu", "label": 5}, {"backend": "cpu", "log": "print"},
                       {"backend": "cpu", "cpu_threads": 1.5}):
            with self.assertRaises(vkattn.Error, msg=str(kwargs)) as e:
                vkattn.Context(**kwargs)
            self.assertIsInstance(e.exception, TypeError)
        with vkattn.Context(backend="cpu", validation=False) as ctx:
            self.assertEqual(ctx.backend, "cpu")


class TestBackendsAgree(unittest.TestCase):
    def test_python_vulkan_losses_match_cpu(self):
        losses = {}
        for backend in ("cpu", "vulkan"):
            ctx = open_context(backend)
            data = vkattn.Data.load(ctx)
            gpt = vkattn.GPT.create(ctx, V=data.tokenizer.vocab_size, seed=11, **CFG)
            rng = [5]
            losses[backend] = [gpt.train_step(*data.batch(B, T, rng_state=rng), B, T, lr=1e-2)
                               for _ in range(4)]
            gpt.close()
            data.close()
            if backend == "vulkan":
                self.assertEqual(ctx.validation_messages, 0)
            ctx.close()
        for cpu, vk in zip(losses["cpu"], losses["vulkan"]):
            self.assertAlmostEqual(cpu, vk, delta=1e-3 * max(1.0, abs(cpu)),
                                   msg=f"cpu {losses['cpu']} vulkan {losses['vulkan']}")


if __name__ == "__main__":
    print(f"vkattn {vkattn.version()} from {vkattn.load_library()._name}")
    unittest.main(verbosity=2)
