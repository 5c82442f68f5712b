{
  "targets": [
    {
      "target_name": "baton_native",
      "sources": ["baton_native.c", "fused.c", "optim.c", "napi_args.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-O3", "-fno-trapping-math", "-fno-math-errno", "-Wall", "-Wextra"],
      "libraries": ["-lopenblas"]
    }
  ]
}
