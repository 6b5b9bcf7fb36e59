#ifndef CD_RUNTIME_CPU_QUOTA_H
#define CD_RUNTIME_CPU_QUOTA_H

// The CPU time the process's cgroup may use (the CFS quota a container's
// CPU limit sets: `docker --cpus`, a Kubernetes limit), in CPUs: the
// smallest quota / period from the process's cgroup up to the hierarchy's
// root, cgroup v2 (cpu.max) or v1 (cpu.cfs_quota_us / cpu.cfs_period_us).
// The affinity mask does not show it: a container limited to 2 CPUs on a
// 64-core host sees 64. More compute threads than the quota run in bursts
// and are throttled for the rest of every period (docs/OPERATIONS.md,
// "Compute threads").
//
// proc_self: the folder holding mountinfo and cgroup ("/proc/self"; NULL
// for that); the mount points it names are read as they are. Returns the
// quota in CPUs, or 0 when there is none or it cannot be read.
double cd_cpu_quota(const char *proc_self);

#endif // CD_RUNTIME_CPU_QUOTA_H
