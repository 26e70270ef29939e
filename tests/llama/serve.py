"""Serves a GGUF model with llama.cpp's OpenAI-compatible HTTP server, as shipped prebuilt in
the `xllamacpp` wheel, on 127.0.0.1 until the process is killed or its stdin closes.

Prints one line `ready http://127.0.0.1:PORT` once the server listens and the model is loaded.
Answers are bounded (`--max-tokens`, default 16) and deterministic (greedy sampling, end of
text ignored), so a random-weight model from make_model.py answers every request with the
same few words of gibberish in well under a second.

Usage: python serve.py --model MODEL.gguf --port PORT
"""

import argparse
import sys
import threading

import xllamacpp as xlc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the GGUF model file")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens per answer when the request sets none")
    args = parser.parse_args()

    params = xlc.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = 1024
    params.n_predict = args.max_tokens
    params.n_parallel = 2
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.warmup = False
    # Every request computes its whole prompt afresh, so equal requests get equal answers.
    params.cache_prompt = False
    # Greedy and bounded: the same answer every time, always `max_tokens` long (a random model
    # could otherwise pick the end-of-text token first and answer nothing).
    params.sampling.temp = 0.0
    params.sampling.top_k = 1
    params.sampling.seed = 1
    params.sampling.ignore_eos = True

    server = xlc.Server(params)
    print(f"ready {server.listening_address}", flush=True)
    # The server runs on its own threads; stay alive until stdin closes or a signal ends us.
    done = threading.Event()

    def watch_stdin() -> None:
        try:
            sys.stdin.read()
        finally:
            done.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        done.wait()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
