/* The ORT callbacks implemented in Python (cffi extern "Python"). */
extern "Python" uint32_t py_factory_get_vendor_id(const OrtEpFactory*);
extern "Python" OrtStatus* py_factory_get_supported_devices(OrtEpFactory*, const OrtHardwareDevice* const*, size_t,
                                                            OrtEpDevice**, size_t, size_t*);
extern "Python" OrtStatus* py_factory_create_ep(OrtEpFactory*, const OrtHardwareDevice* const*,
                                                const OrtKeyValuePairs* const*, size_t, const OrtSessionOptions*,
                                                const OrtLogger*, OrtEp**);
extern "Python" void py_factory_release_ep(OrtEpFactory*, OrtEp*);
extern "Python" OrtStatus* py_factory_create_allocator(OrtEpFactory*, const OrtMemoryInfo*, const OrtKeyValuePairs*,
                                                       OrtAllocator**);
extern "Python" void py_factory_release_allocator(OrtEpFactory*, OrtAllocator*);
extern "Python" OrtStatus* py_factory_create_data_transfer(OrtEpFactory*, OrtDataTransferImpl**);
extern "Python" bool py_factory_is_stream_aware(const OrtEpFactory*);
extern "Python" OrtStatus* py_factory_create_stream(OrtEpFactory*, const OrtMemoryDevice*, const OrtKeyValuePairs*,
                                                    OrtSyncStreamImpl**);

extern "Python" OrtStatus* py_ep_get_capability(OrtEp*, const OrtGraph*, OrtEpGraphSupportInfo*);
extern "Python" OrtStatus* py_ep_get_kernel_registry(OrtEp*, const OrtKernelRegistry**);
extern "Python" OrtStatus* py_ep_compile(OrtEp*, const OrtGraph**, const OrtNode**, size_t, OrtNodeComputeInfo**,
                                         OrtNode**);
extern "Python" void py_ep_release_node_compute_infos(OrtEp*, OrtNodeComputeInfo**, size_t);
extern "Python" OrtStatus* py_ep_is_concurrent_run_supported(OrtEp*, bool*);
extern "Python" OrtStatus* py_ep_get_default_memory_device(const OrtEp*, const OrtMemoryDevice**);
extern "Python" OrtStatus* py_ep_on_session_initialization_end(OrtEp*);
extern "Python" OrtStatus* py_ep_on_run_start(OrtEp*, const OrtRunOptions*);
extern "Python" OrtStatus* py_ep_on_run_end(OrtEp*, const OrtRunOptions*, bool);
extern "Python" bool py_ep_is_graph_capture_enabled(const OrtEp*);
extern "Python" bool py_ep_is_graph_captured(const OrtEp*, int);
extern "Python" OrtStatus* py_ep_replay_graph(OrtEp*, int);
extern "Python" OrtStatus* py_ep_release_captured_graph(OrtEp*, int);
extern "Python" OrtStatus* py_ep_create_profiler(OrtEp*, OrtEpProfilerImpl**);
extern "Python" void py_profiler_release(OrtEpProfilerImpl*);
extern "Python" OrtStatus* py_profiler_start(OrtEpProfilerImpl*, int64_t);
extern "Python" OrtStatus* py_profiler_start_event(OrtEpProfilerImpl*, uint64_t);
extern "Python" OrtStatus* py_profiler_stop_event(OrtEpProfilerImpl*, uint64_t, const OrtProfilingEvent*);
extern "Python" OrtStatus* py_profiler_end(OrtEpProfilerImpl*, OrtProfilingEventsContainer*);

extern "Python+C" OrtStatus* py_kernel_create(void*, const OrtKernelInfo*, OrtKernelImpl**);
extern "Python+C" OrtStatus* py_kernel_compute(int64_t, OrtKernelContext*, vkep_io*);
extern "Python+C" OrtStatus* py_kernel_finish(int64_t, void*);
extern "Python" void py_kernel_release(OrtKernelImpl*);
extern "Python" OrtStatus* py_kernel_prepack(OrtKernelImpl*, const OrtValue*, int, OrtAllocator*,
                                             OrtSharedPrePackedWeightCache*, bool*);
extern "Python" OrtStatus* py_kernel_set_shared(OrtKernelImpl*, const void* const*, const size_t*, size_t, int);

extern "Python" void py_loop_helper_release(OrtLoopKernelHelper*);
extern "Python" OrtStatus* py_loop_concat(OrtLoopKernelHelper*, void*, const OrtValue* const*, size_t, void*, size_t);
extern "Python" void py_scan_helper_release(OrtScanKernelHelper*);
extern "Python" OrtStatus* py_scan_transpose(OrtScanKernelHelper*, const size_t*, size_t, const OrtValue*,
                                             OrtSyncStream*, OrtValue*);
extern "Python+C" void* py_alloc(OrtAllocator*, size_t);

extern "Python" void py_transfer_release(OrtDataTransferImpl*);
extern "Python" bool py_transfer_can_copy(const OrtDataTransferImpl*, const OrtMemoryDevice*, const OrtMemoryDevice*);
extern "Python" OrtStatus* py_transfer_copy(OrtDataTransferImpl*, const OrtValue**, OrtValue**, OrtSyncStream**,
                                            size_t);

extern "Python" void py_stream_release(OrtSyncStreamImpl*);
extern "Python" void* py_stream_get_handle(OrtSyncStreamImpl*);
extern "Python" OrtStatus* py_stream_create_notification(OrtSyncStreamImpl*, OrtSyncNotificationImpl**);
extern "Python" OrtStatus* py_stream_flush(OrtSyncStreamImpl*);
extern "Python" OrtStatus* py_stream_on_run_end(OrtSyncStreamImpl*);
extern "Python" void py_notification_release(OrtSyncNotificationImpl*);
extern "Python" OrtStatus* py_notification_activate(OrtSyncNotificationImpl*);
extern "Python" OrtStatus* py_notification_wait_on_device(OrtSyncNotificationImpl*, OrtSyncStream*);
extern "Python" OrtStatus* py_notification_wait_on_host(OrtSyncNotificationImpl*);

extern "Python" OrtStatus* py_factory_create_importer(OrtEpFactory*, const OrtEpDevice*, OrtExternalResourceImporterImpl**);
extern "Python" bool py_importer_can_import_memory(const OrtExternalResourceImporterImpl*, int);
extern "Python" OrtStatus* py_importer_import_memory(OrtExternalResourceImporterImpl*, const OrtExternalMemoryDescriptor*,
                                                     OrtExternalMemoryHandle**);
extern "Python" void py_importer_release_memory(OrtExternalResourceImporterImpl*, OrtExternalMemoryHandle*);
extern "Python" void py_memory_handle_release(OrtExternalMemoryHandle*);
extern "Python" OrtStatus* py_importer_create_tensor(OrtExternalResourceImporterImpl*, const OrtExternalMemoryHandle*,
                                                     const OrtExternalTensorDescriptor*, OrtValue**);
extern "Python" bool py_importer_can_import_semaphore(const OrtExternalResourceImporterImpl*, int);
extern "Python" OrtStatus* py_importer_import_semaphore(OrtExternalResourceImporterImpl*,
                                                        const OrtExternalSemaphoreDescriptor*, OrtExternalSemaphoreHandle**);
extern "Python" void py_importer_release_semaphore(OrtExternalResourceImporterImpl*, OrtExternalSemaphoreHandle*);
extern "Python" void py_semaphore_handle_release(OrtExternalSemaphoreHandle*);
extern "Python" OrtStatus* py_importer_wait_semaphore(OrtExternalResourceImporterImpl*, OrtExternalSemaphoreHandle*,
                                                      OrtSyncStream*, uint64_t);
extern "Python" OrtStatus* py_importer_signal_semaphore(OrtExternalResourceImporterImpl*, OrtExternalSemaphoreHandle*,
                                                        OrtSyncStream*, uint64_t);
extern "Python" void py_importer_release(OrtExternalResourceImporterImpl*);
