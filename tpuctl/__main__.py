from tpuctl.entry import main

main()
