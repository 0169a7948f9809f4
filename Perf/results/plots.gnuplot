set terminal pngcairo size 900,560 noenhanced
set logscale xy
set grid
set key left top
set output 'Perf/results/retransmit-scaling.png'
set title 'Retransmit-style workload: cost per operation by live timers'
set xlabel 'live timers'
set ylabel 'ns per operation'
plot for [i=0:6] 'Perf/results/retransmit-scaling.dat' index i using 1:2 with linespoints title columnheader(1)
set output 'Perf/results/protocol-mix.png'
set title 'Protocol mix: run time by work units (fixed virtual time)'
set xlabel 'work units (5 timers each)'
set ylabel 'run time, ms'
plot for [i=0:6] 'Perf/results/protocol-mix.dat' index i using 1:2 with linespoints title columnheader(1)
