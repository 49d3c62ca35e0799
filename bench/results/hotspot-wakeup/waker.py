# waker: a task that sleeps 2 ms and then works for 100 us, N times;
# prints how late it woke (p50, p90, mean). Run pinned to CPU 0 beside
# 30 busy loops there: python3 waker.py 1000
import time, sys, os
n=int(sys.argv[1]); lat=[]
for i in range(n):
    t=time.perf_counter(); time.sleep(0.002); w=time.perf_counter()-t-0.002
    lat.append(w)
    e=time.perf_counter()+0.0001
    while time.perf_counter()<e: pass
lat.sort()
print("wake latency p50 %.2f ms p90 %.2f ms mean %.2f ms"%(lat[n//2]*1e3, lat[n*9//10]*1e3, sum(lat)/n*1e3))
