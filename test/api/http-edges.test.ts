import t from 'tap'
import { startControlPlane } from '../helpers/control-plane.js'

t.test('HTTP edges answer with clear JSON 4xx, never 500', async (t) => {
  const { api } = await startControlPlane(t, 'fake')
  const o = await api.newTenant()

  t.test('unknown routes are 404 {error: "not found"}', async (t) => {
    for (const [m, u] of [
      ['GET', '/'],
      ['GET', '/v1/nope'],
      ['POST', '/v2/keys'],
      ['DELETE', '/v1/keys'],
      ['GET', '/v1/principals/'],
    ]) {
      const r = await api.call(m as string, u as string, undefined, { bearer: o.apiKey })
      t.equal(r.status, 404, `${m} ${u}`)
      t.equal(r.body.error, 'not found')
    }
  })

  t.test('an id too long to name anything is 404, in JSON, without echoing the path', async (t) => {
    const r = await api.get(`/v1/principals/${'x'.repeat(3000)}`, { bearer: o.apiKey })
    t.same(r.body, { error: 'not found', code: 'not_found' })
    t.equal(r.status, 404)
  })

  t.test('malformed JSON is 400', async (t) => {
    for (const raw of ['{bad', '{"email":', '[1,', '{"__proto__":{"x":1},"email":"a@b.co"}']) {
      const r = await api.post('/v1/keys', undefined, { raw })
      t.equal(r.status, 400, raw)
      t.equal(r.body.code, 'invalid_json')
    }
    const notObject = await api.post('/v1/principals', undefined, {
      raw: '"just a string"',
      bearer: o.apiKey,
    })
    t.equal(notObject.status, 400)
  })

  t.test('a body over 1 MB is 413', async (t) => {
    const r = await api.post('/v1/principals', undefined, {
      raw: JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) }),
      bearer: o.apiKey,
    })
    t.equal(r.status, 413)
    t.equal(r.body.code, 'payload_too_large')
  })

  t.test('a non-JSON body is 415, whatever its media type', async (t) => {
    for (const type of [
      'application/x-www-form-urlencoded',
      'text/plain',
      'text/plain; charset=utf-8',
      'application/xml',
      'application/octet-stream',
      'multipart/form-data; boundary=x',
    ]) {
      for (const [url, raw] of [
        ['/v1/principals', '{"name":"x"}'],
        ['/v1/keys', `{"email":"${o.email}"}`],
      ] as const) {
        const r = await api.post(url, undefined, { raw, headers: { 'content-type': type }, bearer: o.apiKey })
        t.equal(r.status, 415, `${type} to ${url}`)
        t.equal(r.body.code, 'unsupported_media_type')
      }
    }
  })

  t.test('JSON is UTF-8: other bytes, charsets and content codings are refused, never decoded', async (t) => {
    const check = (raw: string | Buffer, headers: Record<string, string> = {}) =>
      api.post('/v1/check', undefined, {
        raw,
        headers: { 'content-type': 'application/json', ...headers },
        bearer: o.apiKey,
      })
    // Latin-1 `café`: decoded leniently it was `caf\uFFFD`, one target for many byte strings.
    const latin1 = Buffer.concat([
      Buffer.from('{"verb":"verify","target":"caf'),
      Buffer.from([0xe9]),
      Buffer.from('"}'),
    ])
    const notUtf8 = await check(latin1)
    t.same([notUtf8.status, notUtf8.body.code], [400, 'invalid_json'])
    t.match(notUtf8.body.error, /not UTF-8/)
    for (const charset of ['iso-8859-1', '"utf-16"', 'windows-1252']) {
      const r = await check('{"verb":"verify"}', { 'content-type': `application/json; charset=${charset}` })
      t.same([r.status, r.body.code], [415, 'unsupported_media_type'], charset)
    }
    const gzip = await check('{"verb":"verify"}', { 'content-encoding': 'gzip' })
    t.same([gzip.status, gzip.body.code], [415, 'unsupported_media_type'], 'a content coding')
    for (const ok of ['application/json; charset=utf-8', 'application/json; charset="UTF-8"']) {
      const r = await check(Buffer.from('{"verb":"verify","target":"café"}'), { 'content-type': ok })
      t.equal(r.status, 200, ok)
      t.equal(r.body.decision, 'ALLOW')
    }
    t.equal((await check('{"verb":"verify"}', { 'content-encoding': 'identity' })).status, 200)
  })

  t.test('an empty JSON body on a no-body endpoint is accepted', async (t) => {
    const r = await api.post('/v1/tenant/invites', undefined, { raw: '', bearer: o.apiKey })
    t.equal(r.status, 201)
  })

  t.test('the OpenAPI document is generated from the route schemas', async (t) => {
    const r = await api.get('/v1/openapi.json')
    t.equal(r.status, 200)
    t.equal(r.body.openapi.slice(0, 2), '3.')
    for (const path of [
      '/v1/keys',
      '/v1/me',
      '/v1/principals',
      '/v1/principals/{principalId}',
      '/v1/principals/{principalId}/revoke',
      '/v1/tenant/invites',
      '/v1/systems',
      '/v1/systems/{systemId}',
    ]) {
      t.ok(r.body.paths[path], path)
    }
    t.same(Object.keys(r.body.paths['/v1/systems/{systemId}']).sort(), ['delete', 'get', 'put'])
    const system = r.body.paths['/v1/systems'].post.requestBody.content['application/json'].schema
    for (const field of ['systemId', 'upstream', 'credential', 'routes'])
      t.ok(system.properties[field], field)
    t.equal(system.additionalProperties, false, 'unknown fields are refused')
    const body = r.body.paths['/v1/keys'].post.requestBody.content['application/json'].schema
    t.same(Object.keys(body.properties).sort(), [
      'email',
      'inviteCode',
      'principal_id',
      'scope',
      'tenantName',
    ])
    t.same(body.required, ['email'])
  })

  t.test('each OpenAPI operation says how it authenticates and how it refuses', async (t) => {
    const { paths } = (await api.get('/v1/openapi.json')).body
    const admin = paths['/v1/principals'].post
    t.same(admin.security, [{ apiKey: [] }])
    t.equal(
      admin.responses['401'].content['application/json'].schema.properties.code.enum[0],
      'unknown_api_key',
    )
    t.equal(
      admin.responses['403'].content['application/json'].schema.properties.code.enum[0],
      'insufficient_scope',
    )
    const agent = paths['/v1/check'].post
    t.same(agent.security, [{ apiKey: [] }])
    t.ok(agent.responses['401'], 'an agent endpoint answers 401')
    t.notOk(agent.responses['403'], 'an agent-scoped key may call it: no 403')
    const sponsorOps = Object.values(paths)
      .flatMap((ops) => Object.values(ops as Record<string, { security?: unknown }>))
      .filter((op) => JSON.stringify(op.security) === JSON.stringify([{ sponsorToken: [] }]))
    t.ok(sponsorOps.length > 0, 'sponsor endpoints declare the sponsor token')
    t.notOk(paths['/v1/keys'].post.security, 'key issuance needs no credential')
  })
})
