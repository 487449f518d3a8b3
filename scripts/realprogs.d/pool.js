// pool.js - Node.js work that runs on libuv's thread pool (fs, crypto,
// zlib, dns) and in child processes; prints digests that are the same on
// every run.  scripts/realprogs.sh case node-pool.
'use strict';
const fs = require('fs'), fsp = fs.promises, path = require('path');
const crypto = require('crypto'), zlib = require('zlib'), dns = require('dns');
const cp = require('child_process'), util = require('util');

async function main() {
	const dir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'weftpool-'));
	const h = crypto.createHash('sha256');
	// 400 files written, read back and removed, 64 at a time
	for (let b = 0; b < 400; b += 64) {
		const ids = [...Array(Math.min(64, 400 - b)).keys()].map(i => b + i);
		await Promise.all(ids.map(i => fsp.writeFile(path.join(dir, 'f' + i), 'file ' + i + '\n'.repeat(i))));
		const bufs = await Promise.all(ids.map(i => fsp.readFile(path.join(dir, 'f' + i))));
		bufs.forEach(x => h.update(x));
	}
	const names = (await fsp.readdir(dir)).sort();
	await Promise.all(names.map(n => fsp.unlink(path.join(dir, n))));
	fs.rmdirSync(dir);
	console.log('fs', names.length, h.digest('hex').slice(0, 16));
	// crypto and zlib on the pool
	const keys = await Promise.all([...Array(32).keys()].map(i =>
		util.promisify(crypto.pbkdf2)('pw' + i, 'salt', 2000, 32, 'sha256')));
	console.log('pbkdf2', crypto.createHash('sha256').update(Buffer.concat(keys)).digest('hex').slice(0, 16));
	const big = Buffer.alloc(1 << 22, 'weft ');
	const gz = await Promise.all([...Array(8).keys()].map(() => util.promisify(zlib.gzip)(big)));
	const back = await Promise.all(gz.map(z => util.promisify(zlib.gunzip)(z)));
	console.log('zlib', back.every(x => x.equals(big)), gz[0].length);
	const addrs = await Promise.all([...Array(16).keys()].map(() => dns.promises.lookup('localhost', 4)));
	console.log('dns', addrs.every(a => a.address === '127.0.0.1'));
	// child processes: exec, spawn with pipes, spawnSync
	const outs = await Promise.all([...Array(20).keys()].map(i =>
		util.promisify(cp.execFile)('sh', ['-c', 'echo child ' + i])));
	console.log('exec', outs.map(o => o.stdout).join('').length);
	const r = cp.spawnSync('sh', ['-c', 'cat | wc -c'], { input: big });
	console.log('spawnSync', r.status, r.stdout.toString().trim());
	const c = cp.spawn('sh', ['-c', 'read x; echo got $x; exit 3']);
	let got = '';
	c.stdout.on('data', d => got += d);
	c.stdin.end('hello\n');
	const code = await new Promise(res => c.on('exit', res));
	console.log('spawn', code, got.trim());
	// a timer beside the pool
	await new Promise(res => setTimeout(res, 50));
	console.log('done');
}
main().catch(e => { console.error(e); process.exit(1); });
