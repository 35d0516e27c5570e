# perl launcher.pl FD DROP COMMAND...: launcher.py's job for a session without a terminal,
# in a third of the time (perl-base is on every Debian; no module is loaded).
# COMMAND runs in a process group of ours (the emulator signals the group; we wait on);
# FD gets our pid, then COMMAND's raw wait status. DROP=1: PERL_BADLANG was set for us only.
my ($fd, $drop, @argv) = @ARGV;
delete $ENV{PERL_BADLANG} if $drop;
setpgrp(0, 0);
$SIG{$_} = sub { } for qw(HUP INT QUIT ABRT USR1 USR2 PIPE ALRM TERM TSTP TTIN TTOU XCPU XFSZ);
open(my $report, ">&=", $fd) or die "tpuctl emulator: launcher: fd $fd: $!\n";
my $pid = fork();
die "tpuctl emulator: cannot fork: $!\n" unless defined $pid;
if ($pid == 0) {
    close($report);
    # caught signals go back to their defaults on exec
    exec { $argv[0] } @argv;
    print STDERR "tpuctl emulator: cannot run $argv[0]: $!\n";
    exit 127;
}
syswrite($report, "$$\n");
# Only the command holds its stdio now: its end is the session's end.
open(STDIN, "<", "/dev/null");
open(STDOUT, ">", "/dev/null");
open(STDERR, ">", "/dev/null");
waitpid($pid, 0);
syswrite($report, "$?\n");
