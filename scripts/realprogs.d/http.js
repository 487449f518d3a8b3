// http.js - a Node.js http server (PORT, 0: a free one) that answers each
// request with a 1 KiB body; prints "listening PORT" once it accepts.  Driven by ab in
// scripts/realprogs.sh case node-http.
'use strict';
const port = +process.argv[2] || 0;
const body = Buffer.alloc(1024, 'w');
const srv = require('http').createServer((req, res) => {
	res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': body.length });
	res.end(body);
});
srv.listen(port, '127.0.0.1', () => console.log('listening ' + srv.address().port));
process.on('SIGTERM', () => process.exit(0));
