"""An example gen_chat environment: GSM8K with a calculator tool, written the way agent
builders write agents, with the official `openai` client and function calling.

It serves the environment HTTP contract of docs/genchat.md:

  POST   /episodes                 {"trajectory_id", "row", "endpoint": {"base_url", "api_key", "model"}, ...}
                                   -> {"episode_id": "..."}; the episode runs in the background
  GET    /episodes/ID?wait=SECONDS -> {"done": false} or {"done": true, "reward", "messages", "metrics", "error"}
  DELETE /episodes/ID              -> {} (the episode is abandoned)

Run:  python genchat_env.py --port 8765   (--port 0 picks a free port; the first line on stdout
is "LISTENING http://127.0.0.1:PORT").
"""

import argparse
import ast
import json
import operator
import re
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from openai import OpenAI

SYSTEM = (
    "You are a careful math assistant. Use the calculator tool for arithmetic. "
    "When you know the answer, reply with the final number after '####'."
)

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression with + - * / ** and parentheses.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. 48/2 + 48"}},
            "required": ["expression"],
        },
    },
}

_OPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Mod: operator.mod,
}


MAX_BITS = 4096  # the largest integer a calculation may reach (about 1233 digits)


def calculate(expression):
    """Evaluates arithmetic only (no names, calls or attributes); errors become tool text.
    Numbers are bounded (MAX_BITS): a nested power such as (((10**64)**64)**64)**64 would
    otherwise hold the process (and its GIL, so every episode) for minutes."""

    def bounded(value):
        if isinstance(value, int) and value.bit_length() > MAX_BITS:
            raise ValueError("number too large")
        return value

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow):
                if abs(right) > 64:
                    raise ValueError("exponent too large")
                if isinstance(left, int) and left.bit_length() * abs(right) > MAX_BITS:
                    raise ValueError("number too large")
            return bounded(_OPS[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return bounded(_OPS[type(node.op)](ev(node.operand)))
        raise ValueError("unsupported expression")

    try:
        value = ev(ast.parse(str(expression).replace(",", ""), mode="eval"))
    except Exception as e:  # the model sees the error and may retry
        return f"error: {e}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def final_number(text):
    m = re.search(r"####\s*(-?[\d,]*\.?\d+)", text or "")
    if m is None:
        nums = re.findall(r"-?[\d,]*\.?\d+", text or "")
        if not nums:
            return None
        s = nums[-1]
    else:
        s = m.group(1)
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def run_episode(req, max_turns, max_tokens, cancelled, nudge=True):
    """Plays one episode against the trajectory's endpoint; returns the status body."""
    ep = req["endpoint"]
    client = OpenAI(base_url=ep["base_url"], api_key=ep["api_key"], max_retries=0, timeout=600)
    row = req["row"]
    messages = [{"role": "system", "content": SYSTEM}]
    messages += [{"role": m["role"], "content": m["content"]} for m in row["prompt"] if m["role"] != "system"]
    tool_calls = model_calls = 0
    answer = ""
    for turn in range(max_turns):
        if cancelled.is_set():
            return {"done": True, "error": "cancelled"}
        resp = client.chat.completions.create(
            model=ep.get("model", "policy"), messages=messages, tools=[CALCULATOR], max_tokens=max_tokens)
        model_calls += 1
        msg = resp.choices[0].message
        messages.append(msg.model_dump(exclude_none=True))
        if not msg.tool_calls:
            answer = msg.content or ""
            if "####" in answer or not nudge or turn == max_turns - 1:
                break
            # No final answer yet: ask for it, as agents often do.
            messages.append({"role": "user", "content": "Give the final number after '####'."})
            continue
        for call in msg.tool_calls:
            tool_calls += 1
            try:
                args = json.loads(call.function.arguments or "{}")
                result = calculate(args.get("expression", "")) if call.function.name == "calculator" \
                    else f"error: unknown tool {call.function.name}"
            except (ValueError, AttributeError) as e:
                result = f"error: bad arguments: {e}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    truth = final_number(str(row["reward_model"]["ground_truth"]))
    got = final_number(answer)
    reward = 1.0 if got is not None and truth is not None and abs(got - truth) < 1e-6 else 0.0
    out = []
    for m in messages:  # plain chat messages for the host's records
        o = {"role": m["role"], "content": m.get("content") or ""}
        if m.get("tool_calls"):
            o["tool_calls"] = [{"id": c["id"], "name": c["function"]["name"],
                                "arguments": json.loads(c["function"]["arguments"] or "{}")} for c in m["tool_calls"]]
        if m.get("tool_call_id"):
            o["tool_call_id"] = m["tool_call_id"]
        out.append(o)
    return {"done": True, "reward": reward, "messages": out,
            "metrics": {"env/model_calls": model_calls, "env/tool_calls": tool_calls, "env/answered": float(got is not None)}}


class Episodes:
    def __init__(self, max_turns, max_tokens, nudge):
        self.max_turns, self.max_tokens, self.nudge = max_turns, max_tokens, nudge
        self.lock = threading.Lock()
        self.eps = {}

    def start(self, req):
        eid = uuid.uuid4().hex
        ep = {"done": threading.Event(), "cancel": threading.Event(), "result": None}
        with self.lock:
            self.eps[eid] = ep

        def work():
            try:
                ep["result"] = run_episode(req, self.max_turns, self.max_tokens, ep["cancel"], self.nudge)
            except Exception as e:  # reported to the host as the episode's error
                ep["result"] = {"done": True, "error": f"{type(e).__name__}: {e}"}
            ep["done"].set()

        threading.Thread(target=work, daemon=True).start()
        return eid

    def get(self, eid):
        with self.lock:
            return self.eps.get(eid)

    def delete(self, eid):
        with self.lock:
            ep = self.eps.pop(eid, None)
        if ep:
            ep["cancel"].set()
        return ep


def make_handler(episodes):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            sys.stderr.write("genchat-env: " + fmt % args + "\n")

        def reply(self, code, body):
            b = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)

        def episode_id(self):
            parts = urlparse(self.path).path.strip("/").split("/")
            return parts[1] if len(parts) == 2 and parts[0] == "episodes" else None

        def do_POST(self):
            if urlparse(self.path).path.rstrip("/") != "/episodes":
                return self.reply(404, {"error": f"no route POST {self.path}"})
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                req["endpoint"]["base_url"], req["row"]["prompt"]
            except (ValueError, KeyError, TypeError) as e:
                return self.reply(400, {"error": f"bad episode request: {e}"})
            self.reply(200, {"episode_id": episodes.start(req)})

        def do_GET(self):
            eid = self.episode_id()
            ep = episodes.get(eid) if eid else None
            if ep is None:
                return self.reply(404, {"error": f"unknown episode {eid}"})
            wait = float(parse_qs(urlparse(self.path).query).get("wait", ["0"])[0])
            if not ep["done"].wait(timeout=min(max(wait, 0.0), 60.0)):
                return self.reply(200, {"done": False})
            self.reply(200, ep["result"])

        def do_DELETE(self):
            eid = self.episode_id()
            self.reply(200 if eid and episodes.delete(eid) else 404, {})

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--max-turns", type=int, default=4, help="model calls per episode at most")
    ap.add_argument("--max-tokens", type=int, default=256, help="max_tokens of each chat call")
    ap.add_argument("--no-nudge", action="store_true", help="do not ask again for a missing '####' answer")
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(Episodes(args.max_turns, args.max_tokens, not args.no_nudge)))
    srv.daemon_threads = True
    print(f"LISTENING http://127.0.0.1:{srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
