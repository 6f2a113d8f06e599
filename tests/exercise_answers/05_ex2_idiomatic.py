# As the TF multi-worker tutorial writes it: TF_CONFIG as JSON strings (json.dumps), one per worker.
import json


def three_worker_configs(ports):
    workers = ["localhost:%d" % p for p in ports]
    return [json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}})
            for i in range(3)]
