# threads.pl - perl ithreads: 32 threads cloning the interpreter, a shared
# hash and counter under lock, a Thread::Queue of work, cond_wait /
# cond_signal, thread-local data; prints the same line on every run.
# scripts/realprogs.sh case perl-threads.
use strict; use warnings;
use threads; use threads::shared; use Thread::Queue; use Digest::MD5 qw(md5_hex);
my $n = shift // 32;
my $count :shared = 0;
my %seen :shared;
my $q = Thread::Queue->new(1 .. 2000);
$q->end;
my $ready :shared = 0;
my @t = map {
	my $id = $_;
	threads->create(sub {
		my %mine;   # per-thread: cloned interpreter data
		while (defined(my $w = $q->dequeue)) {
			$mine{$w} = md5_hex("w$w") x 3;
			{ lock($count); $count += $w; }
		}
		{ lock(%seen); $seen{$id} = scalar keys %mine; }
		{ lock($ready); $ready++; cond_broadcast($ready); }
		{ lock($ready); cond_wait($ready) while $ready < $n; }
		return join '', map { substr($mine{$_}, 0, 2) } sort { $a <=> $b } keys %mine;
	});
} 1 .. $n;
my $all = join '', sort map { $_->join } @t;
my $sum = 0; $sum += $seen{$_} for keys %seen;
print "threads $n count $count items $sum digest ", md5_hex(join '', sort split //, $all), "\n";
