# Notebook 05, Exercise 2: a solution. Every task gets the SAME cluster (all three addresses) and its own index.
def three_worker_configs(ports):
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    return [{"cluster": cluster, "task": {"type": "worker", "index": i}} for i in range(len(ports))]
