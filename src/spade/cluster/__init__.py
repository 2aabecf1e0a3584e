"""The SLURM side of the workflow on one machine: the local cluster's overlay of the cluster profile
(``spade.cluster.profile``) and the check that every job got what the profile and its run's placement declare
(``spade.cluster.allocations``). The cluster itself: ``scripts/local_slurm.sh`` (docs/CLUSTER.md)."""
