# Notebook 06, Exercise 3: a solution. One cluster dict with the three jobs, and one TF_CONFIG per task in it.
def ps_cluster_configs(ports):
    chief, w0, w1, ps = (f"localhost:{p}" for p in ports)
    cluster = {"chief": [chief], "worker": [w0, w1], "ps": [ps]}
    tasks = [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)]
    return [{"cluster": cluster, "task": {"type": kind, "index": i}} for kind, i in tasks]
