set -x
cd $(dirname $0)
python3 - <<'PY'
names = ["4,false,1,1,false","8,false,1,1,false","4,true,1,1,false","8,true,1,1,false","4,true,4,1,false","4,true,8,1,false","8,true,4,1,false","16,true,4,1,false","4,true,8,1,true"]
src = '#include "../helpers/kernels/wo_gemv.cu"\n' + "".join(f"template __global__ void wo_gemv<{n}>(const uint4*, const void*, const __half*, const __half*, __half*, int,int,int,int,float);\n" for n in names)
open("inst.cu","w").write(src)
PY
nvcc -arch=sm_90 -std=c++17 -cubin -o inst.cubin inst.cu && cuobjdump -sass inst.cubin > $OUT/sass.txt; ls -la $OUT/sass.txt
