set terminal pngcairo size 900,560 noenhanced
set grid
set key left top
set logscale y
set xlabel 'loss per direction, %'
set ylabel 'goodput, MB/s'
set title 'Bulk goodput of 1200-byte messages, 10 ms each way'
set output 'Perf/results/transport-goodput.png'
plot for [i=0:2] 'Perf/results/transport-goodput.dat' index i using 1:2 with linespoints title columnheader(1)
