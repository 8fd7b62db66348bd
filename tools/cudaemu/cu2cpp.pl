#!/usr/bin/perl
# verlc CUDA emulator: turns a .cu file into C++ for the host compiler (tools/cudaemu/README.md).
#   kernel<<<grid, block, smem, stream>>>(args)  ->  vc_emu_launch(vc_emu_make_cfg(grid, block, smem, stream), "kernel", kernel, args)
#   extern __shared__ T name[];                 ->  T *name = (T *)vc_emu_dyn_smem();
# Lines are kept one for one (#line names the .cu file), so compiler messages point at the source.
use strict;
use warnings;
my ($in, $out) = @ARGV;
die "usage: cu2cpp.pl IN.cu OUT.cpp\n" unless defined $out;
open(my $fi, '<', $in) or die "cu2cpp.pl: $in: $!\n";
open(my $fo, '>', "$out.tmp") or die "cu2cpp.pl: $out.tmp: $!\n";
print $fo "#line 1 \"$in\"\n";
while (my $l = <$fi>) {
    $l =~ s/extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([A-Za-z_][\w ]*?)\s+(\w+)\s*\[\s*\]\s*;/$1 *$2 = ($1 *)vc_emu_dyn_smem();/g;
    $l =~ s{(\b[A-Za-z_]\w*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\(\s*(\)?)}{"vc_emu_launch(vc_emu_make_cfg($2), \"$1\", $1" . ($3 ? ")" : ", ")}ge;
    die "cu2cpp.pl: $in:$.: a launch this script cannot rewrite (<<< and >>>( on one line)\n" if $l =~ /<<<|>>>\s*\(/;
    print $fo $l;
}
close($fo) or die "cu2cpp.pl: $out.tmp: $!\n";
rename("$out.tmp", $out) or die "cu2cpp.pl: $out: $!\n";
