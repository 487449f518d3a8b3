# apache-lib.sh -- sourced by bench/apache.sh and bench/apache_signals.sh:
# the throw-away server both run.
#
#   apache_setup PORT PAGE_BYTES MPM_LINES
#
# Makes $dir (a temporary ServerRoot, removed at exit) holding
# htdocs/index.html (PAGE_BYTES random bytes, base64) and httpd.conf:
# Debian's apache2 with mpm_worker on 127.0.0.1:PORT, the children as
# www-data, then MPM_LINES (the caller's StartServers, ThreadsPerChild,
# KeepAlive...).
apache_setup() {
	local port=$1 bytes=$2 mpm=$3
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' EXIT
	mkdir -p "$dir/htdocs"
	head -c "$bytes" /dev/urandom | base64 >"$dir/htdocs/index.html"
	chown -R www-data "$dir"
	local mods=/usr/lib/apache2/modules
	cat >"$dir/httpd.conf" <<CONF
ServerRoot $dir
PidFile $dir/httpd.pid
Listen 127.0.0.1:$port
LoadModule mpm_worker_module $mods/mod_mpm_worker.so
LoadModule authz_core_module $mods/mod_authz_core.so
LoadModule dir_module $mods/mod_dir.so
LoadModule mime_module $mods/mod_mime.so
TypesConfig /etc/mime.types
ServerName localhost
User www-data
Group www-data
DocumentRoot $dir/htdocs
ErrorLog $dir/error.log
Mutex file:$dir default
<Directory $dir/htdocs>
  Require all granted
</Directory>
$mpm
CONF
}
