"""The Python binding on both backends (ctest: test_python, label "python").

Run: VKATTN_LIBRARY=build/libvkattn.so.0 python3 bindings/python/test_vkattn.py
A missing Vulkan device skips the Vulkan cases, unless VKATTN_REQUIRE_GPU=1 (then it fails).
"""

import math
import os
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


class TestCPU(Backend, unittest.TestCase):
    backend = "cpu"


class TestVulkan(Backend, unittest.TestCase):
    backend = "vulkan"


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
