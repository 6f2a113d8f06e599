# Wrong: the parameter server is listed as a third worker.
def ps_cluster_configs(ports):
    cluster = {"chief": [f"localhost:{ports[0]}"], "worker": [f"localhost:{p}" for p in ports[1:]]}
    return [{"cluster": cluster, "task": {"type": t, "index": i}} for t, i in [("chief", 0), ("worker", 0),
                                                                               ("worker", 1), ("worker", 2)]]
