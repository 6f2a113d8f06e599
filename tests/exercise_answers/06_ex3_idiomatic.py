# Built with a loop over the cluster's jobs, as JSON strings.
import json


def ps_cluster_configs(ports):
    addresses = iter(f"localhost:{p}" for p in ports)
    cluster = {job: [next(addresses) for _ in range(n)] for job, n in (("chief", 1), ("worker", 2), ("ps", 1))}
    return [json.dumps({"cluster": cluster, "task": {"type": job, "index": i}})
            for job, addrs in cluster.items() for i in range(len(addrs))]
