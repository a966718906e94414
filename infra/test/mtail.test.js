import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { renderAll } from '../render.js';
import { ROOT, resolveSettings } from '../resolve.js';

/** Runs the mtail program over a log in one-shot mode and returns its metrics (Prometheus text). @param {string} log */
function mtail(log) {
  return execFileSync(
    'mtail',
    [
      '-one_shot',
      '-one_shot_format',
      'prometheus',
      // it still opens its HTTP port in one-shot mode (:3903 by default, where a running stack's mtail is)
      '-port',
      '0',
      '-progs',
      path.join(ROOT, 'monitoring/mtail'),
      '-logs',
      log,
      '-logtostderr',
    ],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

test('mtail turns the access log sample into edge histograms by route, cache result and status class', () => {
  const sample = path.join(ROOT, 'monitoring/mtail/testdata/access.log');
  assert.ok(fs.existsSync(sample), 'the sample log is in the repository'); // mtail reads a missing file as an empty one
  const out = mtail(sample);
  const value = (/** @type {string} */ series) =>
    Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(out)?.[1]);
  assert.equal(
    value('edge_request_duration_seconds_count{cache="HIT",prog="edge.mtail",route="image",status_class="2xx"}'),
    1,
  );
  assert.equal(
    value(
      'edge_request_duration_seconds_bucket{cache="MISS",prog="edge.mtail",route="image",status_class="2xx",le="0.1"}',
    ),
    0,
  );
  assert.equal(
    value(
      'edge_request_duration_seconds_bucket{cache="MISS",prog="edge.mtail",route="image",status_class="2xx",le="0.25"}',
    ),
    1,
  );
  assert.equal(
    value('edge_request_duration_seconds_sum{cache="HIT",prog="edge.mtail",route="avatar",status_class="3xx"}'),
    0.002,
  );
  assert.equal(value('edge_requests_total{cache="PASS",prog="edge.mtail",route="upload",status_class="2xx"}'), 1);
  assert.equal(value('edge_requests_total{cache="-",prog="edge.mtail",route="hook",status_class="2xx"}'), 1);
  assert.equal(value('edge_requests_total{cache="PASS",prog="edge.mtail",route="image",status_class="5xx"}'), 1);
  assert.equal(value('edge_requests_total{cache="-",prog="edge.mtail",route="other",status_class="4xx"}'), 1);
  assert.equal(value('edge_response_bytes_total{cache="MISS",prog="edge.mtail",route="image"}'), 9876);
});

test('the log format nginx writes is the one the mtail program reads', async () => {
  const config = await resolveSettings({
    ENV_FILE: '/nonexistent',
    STACK_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'mtail-')),
  });
  try {
    const values = renderAll(config);
    const nginx = fs.readFileSync(path.join(values.CONF_DIR, 'nginx.conf'), 'utf8');
    const format = /log_format edge ([\s\S]*?);/.exec(nginx)?.[1].replace(/'\s*'/g, '').replace(/'/g, '');
    // $logged_uri: the request URI without bearer tokens (a map in nginx.conf)
    assert.equal(
      format,
      '$time_iso8601 $request_id $remote_addr "$request_method $logged_uri" $status $body_bytes_sent $request_time $upstream_response_time $route_class $cache_result',
    );
  } finally {
    fs.rmSync(config.STACK_DIR, { recursive: true, force: true });
  }
});
