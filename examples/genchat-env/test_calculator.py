"""The calculator tool's answers and bounds (python3 test_calculator.py; needs no openai client)."""
import sys
import types
import unittest

sys.modules.setdefault("openai", types.SimpleNamespace(OpenAI=None))  # calculate does not use it
import genchat_env  # noqa: E402


class Calculator(unittest.TestCase):
    def test_arithmetic(self):
        for expr, want in [("48/2 + 48", "72"), ("2**10", "1024"), ("-(3 - 5) * 4", "8"), ("1,000 + 1", "1001"),
                           ("7 % 4", "3"), ("10**64", str(10**64))]:
            self.assertEqual(genchat_env.calculate(expr), want, expr)

    def test_refused(self):
        for expr in ["__import__('os').system('true')", "open('x')", "(1).real", "2**65", "1/0"]:
            self.assertTrue(genchat_env.calculate(expr).startswith("error:"), expr)

    def test_bounded(self):
        # Unbounded, the first of these takes over a minute of CPU and the second far longer
        # (and the third fails outside calculate, on str() of a 262,145-digit number).
        for expr in ["(((10**64)**64)**64)**64", "((((10**64)**64)**64)**64)**64", "((10**64)**64)**64",
                     "(10**64)**64 * (10**64)**64 * (10**64)**64"]:
            self.assertEqual(genchat_env.calculate(expr), "error: number too large", expr)


if __name__ == "__main__":
    unittest.main()
