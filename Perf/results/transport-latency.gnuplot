set terminal pngcairo size 900,560 noenhanced
set grid
set key left top
set logscale y
set xlabel 'loss per direction, %'
set ylabel 'latency, ms'
set title 'One-way latency of 64-byte messages at 100/s, 10 ms each way'
set output 'Perf/results/transport-latency.png'
plot for [i=0:3] 'Perf/results/transport-latency.dat' index i using 1:2 with linespoints title columnheader(1)
