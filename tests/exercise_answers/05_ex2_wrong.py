# Wrong: every worker claims index 0.
def three_worker_configs(ports):
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    return [{"cluster": cluster, "task": {"type": "worker", "index": 0}} for _ in ports]
