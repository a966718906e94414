// Which chain operations become purges: the follower's reading of a block against the last mapping the
// resolver saw (real Redis), op by op as condenser_api.get_ops_in_block returns them.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { avatarLastKey } from '@stack/lib';
import { changesIn } from '../src/hive-follow.js';
import { startRedis } from '../../test/support/processes.js';

/** @type {Awaited<ReturnType<typeof startRedis>>} */
let redis;
before(async () => {
  redis = await startRedis();
});
after(() => redis?.stop());

const profile = (/** @type {Record<string, unknown>} */ fields) => JSON.stringify({ profile: fields });
/** @param {string} name @param {Record<string, unknown>} body */
const op = (name, body) => ({ op: [name, { extensions: [], ...body }] });

test('account_update (json_metadata) and account_update2 (posting_json_metadata with profile.version) both count', async () => {
  const events = await changesIn(
    [
      op('account_update', {
        account: 'old-style',
        json_metadata: profile({ profile_image: 'https://img.example/a.png' }),
      }),
      op('account_update2', {
        account: 'new-style',
        json_metadata: '',
        posting_json_metadata: profile({
          version: 2,
          profile_image: 'https://img.example/b.png',
          cover_image: 'https://img.example/c.png',
        }),
      }),
      // posting metadata without profile.version: the frontends' older shape, json_metadata is the profile
      op('account_update2', {
        account: 'mixed',
        json_metadata: profile({ profile_image: 'https://img.example/m.png' }),
        posting_json_metadata: profile({ profile_image: 'https://img.example/ignored.png' }),
      }),
    ],
    redis.client,
  );
  assert.deepEqual(
    events.map((event) => [event.account, event.kind, event.avatar]),
    [
      ['old-style', 'both', 'https://img.example/a.png'],
      ['new-style', 'both', 'https://img.example/b.png'],
      ['mixed', 'both', 'https://img.example/m.png'],
    ],
  );
  assert.equal(events[1].cover, 'https://img.example/c.png');
  assert.ok(events.every((event) => event.source === 'hive'));
});

test('against the last mapping seen: only what changed is purged, nothing when nothing changed', async () => {
  await redis.client.set(
    avatarLastKey('known'),
    JSON.stringify({ avatar: 'https://img.example/k.png', cover: 'https://img.example/k-cover.png' }),
  );
  const update = (/** @type {Record<string, unknown>} */ fields) =>
    op('account_update2', {
      account: 'known',
      json_metadata: '',
      posting_json_metadata: profile({ version: 2, ...fields }),
    });
  const same = await changesIn(
    [
      update({
        profile_image: 'https://img.example/k.png',
        cover_image: 'https://img.example/k-cover.png',
        about: 'new bio',
      }),
    ],
    redis.client,
  );
  assert.deepEqual(same, [], 'a bio change purges nothing');
  const cover = await changesIn(
    [update({ profile_image: 'https://img.example/k.png', cover_image: 'https://img.example/k-cover-2.png' })],
    redis.client,
  );
  assert.deepEqual(
    cover.map((event) => event.kind),
    ['cover'],
  );
  const avatar = await changesIn(
    [update({ profile_image: 'https://img.example/k-2.png', cover_image: 'https://img.example/k-cover.png' })],
    redis.client,
  );
  assert.deepEqual(
    avatar.map((event) => event.kind),
    ['avatar'],
  );
  const removed = await changesIn([update({ cover_image: 'https://img.example/k-cover.png' })], redis.client);
  assert.deepEqual(
    removed.map((event) => [event.kind, event.avatar]),
    [['avatar', undefined]],
    'an avatar removed is a change too',
  );
});

test('other operations, key-only account updates and unusable metadata purge nothing harmful', async () => {
  const events = await changesIn(
    [
      op('vote', { voter: 'x', author: 'y', permlink: 'z', weight: 1 }),
      op('comment', {
        author: 'y',
        permlink: 'p',
        json_metadata: profile({ profile_image: 'https://img.example/not-a-profile.png' }),
      }),
      op('account_update', { account: 'keys-only', posting: { weight_threshold: 1 } }),
      op('account_update2', { json_metadata: profile({ profile_image: 'https://img.example/no-account.png' }) }),
      { op: null },
      null,
    ],
    redis.client,
  );
  assert.deepEqual(events, []);
  // broken JSON or a non-http image: the account's avatars are purged to the default, never a bad URL
  const broken = await changesIn(
    [
      op('account_update', { account: 'broken', json_metadata: '{"profile": {"profile_image": ' }),
      op('account_update', { account: 'scripted', json_metadata: profile({ profile_image: 'javascript:alert(1)' }) }),
    ],
    redis.client,
  );
  assert.deepEqual(
    broken.map((event) => [event.account, event.avatar]),
    [
      ['broken', undefined],
      ['scripted', undefined],
    ],
  );
});
