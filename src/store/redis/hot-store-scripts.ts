/**
 * Lua scripts of the Redis hot store. Every key a script touches is passed in KEYS and
 * carries the tenant's `{hash tag}`, so each script runs in one slot on Redis Cluster.
 */

/**
 * KEYS: ver, snap. ARGV: version, snapshot JSON, and optionally the version to replace.
 * Monotonic: never moves back, except over exactly the version named (a hot store ahead of a
 * restored database). The bump is announced after (SPUBLISH on the tenant's own channel), by
 * the caller.
 */
export const PUBLISH = `
local cur = tonumber(redis.call('GET', KEYS[1]) or '-1')
local v = tonumber(ARGV[1])
if ARGV[3] then
  if cur ~= tonumber(ARGV[3]) then return 0 end
elseif cur >= v then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], ARGV[1])
return 1
`

/**
 * The atomic commit, for a batch of m commits of one tenant (one round trip for the
 * commits a process made in one turn of its event loop). Each commit is decided on its own,
 * in order, exactly as if it ran alone. ARGV[1] is m; then, per commit, its KEYS and ARGV
 * follow those of the one before.
 *
 * One commit's KEYS: ver, quota counter, receipt stream, then one consumption marker per
 * grant candidate. Its ARGV: version, quota limit (-1: not a check), quota TTL, n,
 * n marker TTLs, n grant ids, receipts JSON ('' none), then n receipts JSON for "candidate i
 * was consumed" ('' none). Its result: {'stale', current} | {'quota', used, limit} |
 * {'ok', grantId, used, streamId, variant}, variant being the consumed candidate's 1-based
 * index when its receipts were queued, else ''. The script returns the m results in order.
 */
export const COMMIT = `
local function commit(kb, ab)
  local cur = redis.call('GET', KEYS[kb + 1])
  if not cur then return {'stale', ''} end
  if cur ~= ARGV[ab + 1] then return {'stale', cur} end
  local limit = tonumber(ARGV[ab + 2])
  local used = 0
  if limit >= 0 then
    used = tonumber(redis.call('GET', KEYS[kb + 2]) or '0')
    if used >= limit then return {'quota', tostring(used), tostring(limit)} end
  end
  local n = tonumber(ARGV[ab + 4])
  local granted = ''
  local gi = 0
  for i = 1, n do
    if redis.call('SET', KEYS[kb + 3 + i], '1', 'NX', 'EX', tonumber(ARGV[ab + 4 + i])) then
      granted = ARGV[ab + 4 + n + i]
      gi = i
      break
    end
  end
  if limit >= 0 then
    redis.call('INCR', KEYS[kb + 2])
    redis.call('EXPIRE', KEYS[kb + 2], tonumber(ARGV[ab + 3]))
  end
  local receipts = ARGV[ab + 5 + 2 * n]
  local variant = ''
  if gi > 0 and ARGV[ab + 5 + 2 * n + gi] ~= '' then
    receipts = ARGV[ab + 5 + 2 * n + gi]
    variant = tostring(gi)
  end
  local id = ''
  if receipts ~= '' then id = redis.call('XADD', KEYS[kb + 3], '*', 'r', receipts) end
  return {'ok', granted, tostring(used + 1), id, variant}
end
local m = tonumber(ARGV[1])
local out = {}
local kb, ab = 0, 1
for j = 1, m do
  local n = tonumber(ARGV[ab + 4])
  out[j] = commit(kb, ab)
  kb = kb + 3 + n
  ab = ab + 5 + 3 * n
end
return out
`

/** KEYS: quota counter (or none), grant marker (or none). ARGV: has quota, has grant. */
export const RELEASE = `
if ARGV[1] == '1' then
  local v = tonumber(redis.call('GET', KEYS[1]) or '0')
  if v > 0 then redis.call('DECR', KEYS[1]) end
end
if ARGV[2] == '1' then redis.call('DEL', KEYS[2]) end
return 1
`
