// The fresh-machine stage's first use of a stack it just brought up (test/fresh/machine.sh):
//   node test/fresh/smoke.js http://127.0.0.1:8080
// with UPLOAD_TOKENS, PURGE_HMAC_KEYS and AVATAR_ADMIN_TOKEN as the stack was started with.
import { Agent, fetch } from 'undici';
import { resolveSettings } from '../../infra/resolve.js';
import { smoke } from '../support/smoke.js';

const base = process.argv[2] || 'http://127.0.0.1:8080';
// the resolver's admin API where the stack put it: its Unix socket (INTERNAL_SOCKETS) or its port
const config = await resolveSettings();
const socketPath = config.AVATAR_RESOLVER_SOCKET;
const resolver = socketPath ? 'http://resolver' : `http://127.0.0.1:${config.AVATAR_RESOLVER_PORT}`;
const dispatcher = socketPath ? new Agent({ connect: { socketPath } }) : undefined;
await smoke(base, {
  uploadToken: String(process.env.UPLOAD_TOKENS).split(',')[0],
  hmacKey: String(process.env.PURGE_HMAC_KEYS).split(',')[0],
  setAvatar: async (account, url) => {
    const answer = await fetch(`${resolver}/admin/accounts/${account}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${process.env.AVATAR_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ avatar: url }),
      ...(dispatcher ? { dispatcher } : {}),
    });
    if (answer.status !== 200)
      throw new Error(`PUT /admin/accounts/${account}: ${answer.status} ${await answer.text()}`);
  },
});
console.log(
  'smoke: an upload, a resized variant, a HEIC and its variant, an avatar redirect and a signed purge through the edge: ok',
);
