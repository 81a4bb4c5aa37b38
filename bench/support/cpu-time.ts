/**
 * CPU time of processes, read from /proc (Linux). On a shared host the throughput of one
 * process depends on what else runs; CPU time per request does not, so it tells what a path
 * costs apart from the contention around it.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

/** Clock ticks per second for /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100

/**
 * User and system (kernel, on the process's behalf: syscalls, the loopback network stack) CPU
 * milliseconds of one process, 0 if it is gone. Which of the two a path adds tells JavaScript
 * from I/O.
 */
export function cpuSplitMs(pid: number): { user: number; system: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { user: (Number(fields[11]) * 1000) / TICKS, system: (Number(fields[12]) * 1000) / TICKS }
  } catch {
    return { user: 0, system: 0 }
  }
}

/** User + system CPU milliseconds of one process, 0 if it is gone. */
export function cpuMs(pid: number): number {
  const { user, system } = cpuSplitMs(pid)
  return user + system
}

/** Pids of every running process with this exact command name. */
export function pidsOf(name: string): number[] {
  try {
    return execFileSync('pgrep', ['-x', name]).toString().trim().split('\n').filter(Boolean).map(Number)
  } catch {
    return []
  }
}

/** Busy CPU milliseconds of the whole machine, summed over all cores. */
export function machineBusyMs(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] as string
  const [, user, nice, system, , , irq, softirq, steal] = line.split(/\s+/).map(Number)
  return (
    (((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) * 1000) / TICKS
  )
}

/** Starts a measurement over named groups of processes; the returned function ends it. */
export function measureCpu(groups: Record<string, () => number[]>): () => Record<string, number> {
  const pids = Object.fromEntries(Object.entries(groups).map(([k, f]) => [k, f()]))
  const sum = (ps: number[]) => ps.reduce((a, p) => a + cpuMs(p), 0)
  const before = Object.fromEntries(Object.entries(pids).map(([k, ps]) => [k, sum(ps)]))
  const busy0 = machineBusyMs()
  return () => {
    const out: Record<string, number> = {}
    for (const [k, ps] of Object.entries(pids)) out[k] = sum(ps) - (before[k] ?? 0)
    out.machine = machineBusyMs() - busy0
    return out
  }
}

/** Resident memory of one process in MB (`now`: VmRSS; `peak`: VmHWM), 0 if it is gone. */
export function rssMb(pid: number | undefined): { now: number; peak: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0)
    return { now: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 }
  } catch {
    return { now: 0, peak: 0 }
  }
}
